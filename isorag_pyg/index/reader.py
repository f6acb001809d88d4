"""The read side of an index: its contents and records, and what answers questions over them (the
encoder, the retrievers by name, ranked passages, explained traces).
:class:`~isorag_pyg.index.ISORAGIndex` adds building, saving, training and updates to it.

Nothing here imports PyG, Lightning or geoopt: an opened index keeps its graph as the
:class:`~isorag_pyg.store.contents.StoredGraph` read from its files and f_θ as its weights, and
builds the PyG ``Data`` and the f_θ module the first time something asks for them
(:attr:`IndexReader.graph`, :attr:`IndexReader.f_theta`), which answering questions never does.
"""
from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from isorag_pyg import defaults
from isorag_pyg.encoders.sentence import TextEncoder
from isorag_pyg.encoders.spec import check_encoder, encoder_from_spec
from isorag_pyg.graph.builders import mention_edges
from isorag_pyg.index.f_theta import check_phi_spec
from isorag_pyg.index.registry import make_retriever
from isorag_pyg.index.results import RetrievedPassage, explained, retrieved_passages
from isorag_pyg.knobs import Knobs, PhiSpec
from isorag_pyg.retrieval import ANNIndex, Queries, RetrievalGraph, Retriever
from isorag_pyg.retrieval.types import check_questions
from isorag_pyg.store.contents import IndexContents
from isorag_pyg.store.ids import next_number
from isorag_pyg.store.passages import PassageStore
from isorag_pyg.store.storage import Origin, StoredANN, StoredFTheta, ann_info
from isorag_pyg.utils.device import device_of
from isorag_pyg.utils.isoperimetric import log_phi_from_ball

if TYPE_CHECKING:
    from torch_geometric.data import Data

    from isorag_pyg.nn.poincare_encoder import PoincareEncoder
    from isorag_pyg.qa.answering import Answering
    from isorag_pyg.qa.prompt import History
    from isorag_pyg.qa.reader_spec import Reader, ReaderSpec


def _content(name: str) -> Any:
    """A read-only attribute of the index's :class:`IndexContents`."""
    return property(lambda self: getattr(self.contents, name), doc=f"``contents.{name}`` (read-only; an update replaces the contents).")


class IndexReader:
    """An index's contents (passages, embeddings, graph, φ), its recipe (encoder, graph builders,
    φ spec, f_θ) and stored knobs, with the retrievers over them. The constructor takes keywords
    only: what :func:`~isorag_pyg.index.build.build_index` and
    :func:`~isorag_pyg.store.storage.load_index` return."""

    def __init__(self, *, contents: IndexContents, encoder: dict[str, Any], phi: PhiSpec, graph_spec: dict[str, Any],
                 f_theta: PoincareEncoder | StoredFTheta | None = None, f_theta_info: dict[str, Any] | None = None,
                 knobs: Mapping[str, Mapping[str, Any]] | None = None, created: str | None = None,
                 ann: ANNIndex | StoredANN | None = None, next_id: int | None = None, origin: Origin | None = None,
                 max_tokens: int | None = None, quarantined: Sequence[str] = ()):
        self.contents, self.encoder_spec, self.phi, self.graph_spec = contents, encoder, phi, graph_spec
        self._f_theta, self.f_theta_info = f_theta, f_theta_info
        self.knobs: dict[str, dict[str, Any]] = {name: dict(values) for name, values in (knobs or {}).items()}
        self.created = created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self._ann = ann
        self._next_id, self.origin = next_id, origin  # origin: see generation
        self.max_tokens = defaults.MAX_TOKENS if max_tokens is None else max_tokens  # tokens a passage when isorag add splits documents
        self._encoder: TextEncoder | None = None
        self.quarantined: list[str] = list(quarantined)  # passage ids left out of the walk until released
        self._drop_caches()

    def _drop_caches(self) -> None:
        self._retrieval_graphs: dict[torch.device, RetrievalGraph] = {}
        self._phi_variants: dict[PhiSpec, Tensor] = {self.phi: self.contents.log_phi}
        self._retrievers: dict[tuple[str, Knobs], Retriever] = {}

    passages: PassageStore = _content("passages")
    embeddings: Tensor = _content("embeddings")
    log_phi: Tensor = _content("log_phi")
    bridging: Tensor = _content("bridging")
    z: Tensor | None = _content("z")
    knn_edges: Tensor | None = _content("knn_edges")
    statistics: dict[str, Any] = _content("statistics")
    corpus_hash: str = _content("corpus_hash")

    @property
    def graph(self) -> Data:
        """The corpus graph, a PyG ``Data`` (an opened index builds it from its files on first use)."""
        self.contents = self.contents.with_data()
        return self.contents.graph

    @property
    def entity_names(self) -> list[str]:
        """An entity graph's entity nodes, the graph's rows after the passages (none without one)."""
        return list(getattr(self.contents.graph, "entity_names", []))

    @property
    def unique_mentions(self) -> dict[str, int]:
        """An entity graph's entities that only one passage mentions: entity key -> passage row."""
        return dict(getattr(self.contents.graph, "unique_mentions", {}))

    @property
    def f_theta(self) -> PoincareEncoder | None:
        """f_θ (``None``: not trained); an opened index builds it from its stored weights on first use."""
        if isinstance(self._f_theta, StoredFTheta):
            self._f_theta = self._f_theta.open()
        return self._f_theta

    @property
    def quarantine_mask(self) -> Tensor:
        """``[N]`` bool over the graph's nodes: the quarantined passages."""
        mask = torch.zeros(self.contents.graph.num_nodes, dtype=torch.bool)
        mask[[self.passages.row_of(i) for i in self.quarantined]] = True
        return mask

    @property
    def next_id(self) -> int:
        """The number the next passage added without an id gets (see :mod:`~isorag_pyg.store.ids`)."""
        self._next_id = next_number(self.passages.ids) if self._next_id is None else self._next_id
        return self._next_id

    @property
    def generation(self) -> int:
        """The version ``origin[1]`` of the directory ``origin[0]`` this index was loaded from or saved to (0: neither)."""
        return self.origin[1] if self.origin is not None else 0

    leak: bool = property(lambda self: bool(self.statistics.get("leak", False)), doc="Whether the graph was built from the evaluated questions.")

    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({len(self)} passages, {self.statistics.get('edges', 0)} edges, graph={'+'.join(self.graph_spec)}, "
                f"encoder={self.encoder_spec['name']}, f_theta={'yes' if self.z is not None else 'no'}, phi={self.phi})")

    def log_phi_for(self, spec: PhiSpec) -> Tensor:
        """φ under another recipe (e.g. ``p = 0`` as a control), from the stored coordinates."""
        if spec not in self._phi_variants or spec.curvature != self.phi.curvature:
            check_phi_spec(spec, self.phi.curvature, self.z)
            graph = self.contents.graph
            self._phi_variants[spec] = log_phi_from_ball(graph.edge_index, self.z, spec, num_nodes=graph.num_nodes)
        return self._phi_variants[spec]

    @property
    def ann(self) -> ANNIndex | None:
        """The approximate nearest-neighbour index (``None``: exact scan), read from its file on first use."""
        if isinstance(self._ann, StoredANN):
            self._ann = self._ann.open(len(self), int(self.embeddings.size(1)))
        return self._ann

    @property
    def ann_info(self) -> dict[str, Any]:
        """The ANN index's kind and parameters, as the manifest records them."""
        return ann_info(self._ann)

    @property
    def encoder(self) -> TextEncoder:
        """The encoder questions are embedded with: the one the passages were embedded with (loaded
        on first use, checked against the fingerprint recorded at build time), or one set here
        with that fingerprint (another backend, a query cache)."""
        if self._encoder is None:
            encoder = encoder_from_spec(self.encoder_spec, cache_dir=None, show_progress=False)
            check_encoder(self.encoder_spec, encoder)
            self._encoder = encoder
        return self._encoder

    @encoder.setter
    def encoder(self, encoder: TextEncoder) -> None:
        check_encoder(self.encoder_spec, encoder)
        self._encoder = encoder

    def retrieval_graph(self, device: str | torch.device = "auto") -> RetrievalGraph:
        """The corpus graph prepared for retrieval on ``device`` (built once per device)."""
        device = device_of(device)
        if device not in self._retrieval_graphs:
            graph = self.contents.graph
            backlink = getattr(graph, "edge_backlink", None)
            self._retrieval_graphs[device] = RetrievalGraph(graph.edge_index, graph.x, device, normalized=True,
                                                            edge_weight=graph.edge_weight, num_passages=len(self), edge_backlink=backlink,
                                                            edge_mention=mention_edges(graph.edge_source, graph.builders, backlink))
        return self._retrieval_graphs[device]

    def retriever(self, name: str = defaults.RETRIEVER, device: str | torch.device = "auto", **knobs: Any) -> Retriever:
        """A retriever over this index by name (:data:`~isorag_pyg.index.registry.RETRIEVERS`); knobs not
        given come from the stored ones, then the defaults (:func:`~isorag_pyg.index.registry.make_retriever`)."""
        return make_retriever(self, name, self.knobs, knobs, device, self._retrievers)

    def encode_questions(self, questions: Sequence[str]) -> Queries:
        check_questions(questions)
        return Queries(list(questions), self.encoder.encode(list(questions)))

    def retrieve(self, questions: Sequence[str], k: int = defaults.K, retriever: str = defaults.RETRIEVER, **knobs: Any) -> list[list[RetrievedPassage]]:
        """The top ``k`` passages for every question, best first, with their scores."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        queries = self.encode_questions(questions)
        result = self.retriever(retriever, **knobs).retrieve(queries, k)
        return self.hits(result.indices, result.scores)

    def answer(self, questions: Sequence[str], k: int = defaults.K, retriever: str = defaults.RETRIEVER,
               reader: Reader | ReaderSpec | None = None, **knobs: Any) -> list[dict[str, Any]]:
        """Each question answered by ``reader`` (a made :class:`~isorag_pyg.qa.reader_spec.Reader`, a
        spec, or ``None``: the packaged Gemma, started and stopped here) over its top ``k``
        passages: ``{"question", "answer", "citations", "passages", "timings"}``
        (:mod:`~isorag_pyg.qa.answering`); citations are ids of the retrieved passages, in the order cited."""
        from isorag_pyg.qa.answering import answer_all
        from isorag_pyg.qa.reader_spec import ReaderSpec

        start = time.perf_counter()
        hits = self.retrieve(questions, k, retriever, **knobs)
        retrieval_s = time.perf_counter() - start
        made = (reader or ReaderSpec()).make() if reader is None or isinstance(reader, ReaderSpec) else reader
        try:
            return answer_all(made, list(questions), hits, retrieval_s)
        finally:
            if made is not reader:
                made.close()

    def answer_stream(self, question: str, reader: Reader, k: int = defaults.K, retriever: str = defaults.RETRIEVER,
                      history: History = (), **knobs: Any) -> Answering:
        """One question's answer as it is generated: iterate the returned
        :class:`~isorag_pyg.qa.answering.Answering`'s ``pieces()`` for its text, then read its ``result``
        (the object :meth:`answer` gives); ``history``: earlier turns of a conversation."""
        from isorag_pyg.qa.answering import Answering

        start = time.perf_counter()
        hits = self.retrieve([question], k, retriever, **knobs)[0]
        return Answering(reader, question, hits, time.perf_counter() - start, history)

    def hits(self, indices: Tensor, scores: Tensor) -> list[list[RetrievedPassage]]:
        """Corpus rows and scores as passages."""
        return retrieved_passages(self.passages, indices, scores)

    def explain(self, question: str, png_path: str | Path | None = None, k: int = defaults.K, **knobs: Any) -> dict[str, Any]:
        """ISO-RAG's trace for one question (seeds, candidates, kept and pruned edges, PPR mass,
        top k, every node's title; passages by id) and, with ``png_path``, the case-study picture of its local graph."""
        trace = self.retriever("iso", **knobs).retrieve(self.encode_questions([question]), k, trace=True).traces[0]
        return explained(trace, self.passages, question, png_path, self.entity_names)
