"""The ISO-RAG index: a small state holder over its contents (passages, embeddings, graph, φ),
its recipe (encoder, graph builders, φ spec, f_θ) and the knobs a user stored.

The work lives beside it: building in :mod:`~isorag_pyg.index.build`, saving and loading in
:mod:`~isorag_pyg.store.storage`, updates in :mod:`~isorag_pyg.index.update`, the retrievers by
name in :mod:`~isorag_pyg.index.registry`.
"""
from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data

from isorag_pyg import defaults
from isorag_pyg.datasets.types import Passage
from isorag_pyg.encoders import TextEncoder
from isorag_pyg.encoders.spec import check_encoder, encoder_from_spec
from isorag_pyg.index.bridges import Bridge, strongest_bridges
from isorag_pyg.index.build import build_index
from isorag_pyg.index.corpus import corpus_tokenizer, read_corpus
from isorag_pyg.index.f_theta import IndexGeometry
from isorag_pyg.index.registry import check_retriever_name, make_retriever, resolve_knobs
from isorag_pyg.index.results import RetrievedPassage, explained, retrieved_passages
from isorag_pyg.index.update import Updatable, UpdateReport, added, removed, rows_of
from isorag_pyg.knobs import Knobs, PhiSpec
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.retrieval import ANNIndex, Queries, RetrievalGraph, Retriever
from isorag_pyg.retrieval.ann import check_ann
from isorag_pyg.retrieval.types import check_questions
from isorag_pyg.store.contents import IndexContents
from isorag_pyg.store.ids import next_number
from isorag_pyg.store.passages import PassageStore
from isorag_pyg.store.storage import StoredANN, ann_info, index_manifest, load_index, save_index
from isorag_pyg.training.config import FThetaConfig
from isorag_pyg.utils.device import device_of
from isorag_pyg.utils.isoperimetric import log_volumes_of


def _content(name: str) -> Any:
    """A read-only attribute of the index's :class:`IndexContents`."""
    return property(lambda self: getattr(self.contents, name), doc=f"``contents.{name}`` (read-only; an update replaces the contents).")


class ISORAGIndex(IndexGeometry):
    """An ISO-RAG index over a corpus.

    Build one with :meth:`build` (from passages, or :meth:`read_corpus` of a file or folder),
    keep it with :meth:`save` and open it with :meth:`load`; :meth:`retrieve` answers questions,
    :meth:`retriever` gives the retrievers themselves, :meth:`explain` draws a question's
    local graph; :meth:`add` and :meth:`remove` update it.

    The constructor takes keywords only: what :func:`~isorag_pyg.index.build.build_index` and
    :func:`~isorag_pyg.store.storage.load_index` return.

    Example:
        >>> passages = [{"title": "Paris", "text": "Paris is the capital of France."},
        ...             {"title": "Dijon", "text": "Dijon is a city in France known for mustard."}]
        >>> index = ISORAGIndex.build(passages, f_theta=None, phi=PhiSpec(p=0), progress=False)
        >>> [hit.title for hit in index.retrieve(["Which city is known for mustard?"], k=2)[0]]
        ['Dijon', 'Paris']
    """

    read_corpus = staticmethod(read_corpus)

    def __init__(self, *, contents: IndexContents, encoder: dict[str, Any], phi: PhiSpec, graph_spec: dict[str, Any],
                 f_theta: PoincareEncoder | None = None, f_theta_info: dict[str, Any] | None = None,
                 knobs: Mapping[str, Mapping[str, Any]] | None = None, created: str | None = None,
                 ann: ANNIndex | StoredANN | None = None, next_id: int | None = None, origin: tuple[Path, int] | None = None,
                 max_tokens: int | None = None, quarantined: Sequence[str] = ()):
        self.contents, self.encoder_spec, self.phi, self.graph_spec = contents, encoder, phi, graph_spec
        self.f_theta, self.f_theta_info = f_theta, f_theta_info
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
    graph: Data = _content("graph")
    log_phi: Tensor = _content("log_phi")
    bridging: Tensor = _content("bridging")
    z: Tensor | None = _content("z")
    knn_edges: Tensor | None = _content("knn_edges")
    statistics: dict[str, Any] = _content("statistics")
    corpus_hash: str = _content("corpus_hash")

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
        return (f"ISORAGIndex({len(self)} passages, {self.statistics.get('edges', 0)} edges, graph={'+'.join(self.graph_spec)}, "
                f"encoder={self.encoder_spec['name']}, f_theta={'yes' if self.z is not None else 'no'}, phi={self.phi})")

    @classmethod
    def build(cls, passages: Sequence[Passage | Mapping[str, Any]], **options: Any) -> ISORAGIndex:
        """Embed ``passages``, build the corpus graph, train f_θ, compute φ and (optionally) an
        approximate nearest-neighbour index; ``options`` (``encoder``, ``graph``, ``f_theta``,
        ``phi``, ``ann``, ...) are :func:`~isorag_pyg.index.build.build_index`'s."""
        return cls(**build_index(passages, **options))

    def _fields(self) -> dict[str, Any]:
        """The constructor arguments that reproduce this index (what :meth:`save` writes)."""
        return {"contents": self.contents, "encoder": self.encoder_spec, "phi": self.phi, "graph_spec": self.graph_spec,
                "f_theta": self.f_theta, "f_theta_info": self.f_theta_info, "knobs": self.knobs, "created": self.created, "ann": self._ann,
                "next_id": self.next_id, "max_tokens": self.max_tokens, "quarantined": self.quarantined}

    def save(self, directory: str | Path, lock_timeout: float = defaults.LOCK_TIMEOUT_S) -> Path:
        """Write the index to ``directory`` atomically (a crash leaves any previous index there intact)
        under its writer lock, waiting up to ``lock_timeout`` s; see :func:`~isorag_pyg.store.storage.save_index`."""
        self.origin = save_index(directory, lock_timeout, self.origin, **self._fields())
        return Path(directory)

    @classmethod
    def load(cls, directory: str | Path, verify: bool = True) -> ISORAGIndex:
        """Open a saved index (:func:`~isorag_pyg.store.storage.load_index`: checksums unless not ``verify``, tensors memory-mapped)."""
        return cls(**load_index(directory, verify))

    def info(self) -> dict[str, Any]:
        """The manifest :meth:`save` writes (no checksums): encoder, graph and its statistics, f_θ, φ, knobs, ANN, counts."""
        return {**index_manifest(**self._fields()), "generation": self.generation}

    def manifest(self) -> dict[str, Any]:
        """Deprecated: the former name of :meth:`info` (a ``DeprecationWarning``; removed in a later release)."""
        warnings.warn("ISORAGIndex.manifest() is deprecated: use ISORAGIndex.info()", DeprecationWarning, stacklevel=2)
        return self.info()

    def set_ann(self, kind: str, params: Mapping[str, int] | None = None) -> None:
        """Build the ANN index ISO-RAG, its ablations and dense take candidates from (kept by :meth:`save`): FAISS
        ``"hnsw"`` (``M``, ``ef_construction``, ``ef_search``) or ``"ivf"`` (``nlist``, ``nprobe``, ``train_size``, ``seed``),
        or ``"exact"`` to scan every passage again (defaults: :data:`~isorag_pyg.retrieval.ann.DEFAULT_PARAMS`)."""
        check_ann(kind, params)
        self._ann = None if kind == "exact" else ANNIndex.build(self.embeddings, kind, params)

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
        """The encoder the passages were embedded with (loaded on first use, checked against the
        fingerprint recorded at build time)."""
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
            self._retrieval_graphs[device] = RetrievalGraph(self.graph.edge_index, self.graph.x, device, normalized=True,
                                                            edge_weight=self.graph.edge_weight, num_passages=len(self))
        return self._retrieval_graphs[device]

    def retriever(self, name: str = defaults.RETRIEVER, device: str | torch.device = "auto", **knobs: Any) -> Retriever:
        """A retriever over this index by name (:data:`~isorag_pyg.index.registry.RETRIEVERS`); knobs not
        given come from :meth:`set_knobs`, then the defaults (:func:`~isorag_pyg.index.registry.make_retriever`)."""
        return make_retriever(self, name, self.knobs, knobs, device, self._retrievers)

    def set_knobs(self, name: str, knobs: Mapping[str, Any]) -> None:
        """Store tuned knobs for a retriever (kept by :meth:`save`)."""
        check_retriever_name(name)
        self.retriever(name, device="cpu", **knobs)  # validates them
        self.knobs[name] = dict(knobs)

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

    def hits(self, indices: Tensor, scores: Tensor) -> list[list[RetrievedPassage]]:
        """Corpus rows and scores as passages."""
        return retrieved_passages(self.passages, indices, scores)

    def explain(self, question: str, png_path: str | Path | None = None, k: int = defaults.K, **knobs: Any) -> dict[str, Any]:
        """ISO-RAG's trace for one question (seeds, candidates, kept and pruned edges, PPR mass,
        top k; passages by id) and, with ``png_path``, the case-study picture of its local graph."""
        trace = self.retriever("iso", **knobs).retrieve(self.encode_questions([question]), k, trace=True).traces[0]
        return explained(trace, self.passages, question, png_path, getattr(self.graph, "entity_names", []))

    def _updatable(self) -> Updatable:
        return Updatable(self.contents, self.graph_spec, self.phi, self.f_theta, self.ann, self.next_id)

    def _take_update(self, contents: IndexContents, ann: ANNIndex | None) -> None:
        next_id = next_number(contents.passages.ids, self.next_id)  # counted before removed ids are gone
        self.contents, self._ann, self._next_id = contents, ann, next_id
        self._drop_caches()

    def read_additions(self, path: str | Path, max_tokens: int | None = None) -> list[Passage]:
        """Passages to :meth:`add` from a file or folder, read as this index's own were: documents split at
        ``max_tokens`` (default: :attr:`max_tokens`) tokens of its encoder's tokenizer, ids from :attr:`next_id`."""
        tokenizer = corpus_tokenizer(self.encoder_spec["name"], self.encoder_spec.get("backend", "torch"))
        return read_corpus(path, self.max_tokens if max_tokens is None else max_tokens, tokenizer, self.next_id)

    def add(self, passages: Sequence[Passage | Mapping[str, Any]], refit: FThetaConfig | None = None,
            encoder: TextEncoder | None = None) -> UpdateReport:
        """Append passages (see :func:`~isorag_pyg.index.update.added`): embedded with ``encoder`` (e.g. the
        same model on a GPU), else with the recorded model loaded afresh through the embedding cache, each
        checked against the recorded fingerprint; not with an encoder set through :attr:`encoder`, which
        encodes questions (a serving backend or query cache there does not reach the passages), placed
        in the ball by the stored f_θ (``refit`` trains f_θ again instead). Equals a rebuild over the same
        passages with the same f_θ; ids without a passage's own are numbered from :attr:`next_id`."""

        def encode(texts: list[str]) -> Tensor:
            model = encoder or encoder_from_spec(self.encoder_spec, show_progress=False)
            check_encoder(self.encoder_spec, model)
            return model.encode(texts)

        contents, ann, report = added(self._updatable(), passages, encode)
        self._take_update(contents, ann)
        if refit is not None:
            self.train_f_theta(refit)
            report.phi_recomputed = self.graph.num_nodes
        return report

    def remove(self, ids: Iterable[str]) -> UpdateReport:
        """Remove passages by id; the graph, the ball coordinates of the rest and φ around the
        removed passages are updated as a rebuild would. An unknown id is an error."""
        contents, ann, report = removed(self._updatable(), ids)
        self._take_update(contents, ann)
        self.quarantined = [i for i in self.quarantined if self.passages.row_of(i) is not None]
        return report

    @property
    def quarantine_mask(self) -> Tensor:
        """``[N]`` bool over the graph's nodes: the quarantined passages."""
        mask = torch.zeros(self.graph.num_nodes, dtype=torch.bool)
        mask[[self.passages.row_of(i) for i in self.quarantined]] = True
        return mask

    def quarantine(self, ids: Iterable[str], release: bool = False) -> list[str]:
        """Leave these passages out of every walk until they are released (``release=True``
        releases them); kept by :meth:`save`. Returns the ids quarantined now. An unknown id is an error."""
        ids = [self.passages[r].id for r in rows_of(self.passages, ids, "quarantine").tolist()]
        self.quarantined = [i for i in self.quarantined if i not in ids] if release else list(dict.fromkeys([*self.quarantined, *ids]))
        self._drop_caches()
        return self.quarantined

    def bridges(self, top: int = 10, ids: Iterable[str] | None = None) -> list[Bridge]:
        """The ``top`` passages by bridging score (or the passages ``ids``), highest first, with what
        they tie together and whether the walk leaves them out (:func:`~isorag_pyg.index.bridges.strongest_bridges`)."""
        rows = None if ids is None else rows_of(self.passages, ids, "bridges").tolist()
        share = resolve_knobs("iso", self.knobs, {})[0].bridge_share
        log_vol = log_volumes_of(self.z, self.phi, self.graph.num_nodes)
        return strongest_bridges(self.passages, self.graph, log_vol, self.phi, self.bridging, share, self.quarantined, top, rows)
