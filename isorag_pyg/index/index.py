"""The ISO-RAG index: a small state holder over its contents (passages, embeddings, graph, φ),
its recipe (encoder, graph builders, φ spec, f_θ) and the knobs a user stored.

The work lives beside it: the read side (encoder, retrievers, ``retrieve``) in
:mod:`~isorag_pyg.index.reader`, building in :mod:`~isorag_pyg.index.build`, saving and loading in
:mod:`~isorag_pyg.store.storage`, updates in :mod:`~isorag_pyg.index.update`, the retrievers by
name in :mod:`~isorag_pyg.index.registry`. Building, training and updating import their modules
(PyG, Lightning, geoopt) when called, so that opening an index and querying it imports none of them.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from isorag_pyg import defaults
from isorag_pyg.datasets.types import Passage
from isorag_pyg.encoders.exported import exported_encoder
from isorag_pyg.index.corpus import corpus_tokenizer, read_corpus
from isorag_pyg.index.reader import IndexReader
from isorag_pyg.index.registry import check_retriever_name
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.retrieval.ann import ANNIndex, check_ann
from isorag_pyg.store.contents import IndexContents
from isorag_pyg.store.ids import next_number
from isorag_pyg.store.storage import index_manifest, load_index, save_index
from isorag_pyg.training.config import FThetaConfig

if TYPE_CHECKING:
    from torch import Tensor

    from isorag_pyg.encoders.sentence import TextEncoder
    from isorag_pyg.index.bridges import Bridge
    from isorag_pyg.index.f_theta import FTheta
    from isorag_pyg.index.update import Updatable, UpdateReport
    from isorag_pyg.nn.poincare_encoder import PoincareEncoder


class ISORAGIndex(IndexReader):
    """An ISO-RAG index over a corpus.

    Build one with :meth:`build` (from passages, or :meth:`read_corpus` of a file or folder),
    keep it with :meth:`save` and open it with :meth:`load`; :meth:`retrieve` answers questions,
    :meth:`retriever` gives the retrievers themselves, :meth:`explain` draws a question's
    local graph (the read side, :class:`~isorag_pyg.index.reader.IndexReader`); :meth:`add` and
    :meth:`remove` update it.

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

    @classmethod
    def build(cls, passages: Sequence[Passage | Mapping[str, Any]], **options: Any) -> ISORAGIndex:
        """Embed ``passages``, build the corpus graph, train f_θ, compute φ and (optionally) an
        approximate nearest-neighbour index; ``options`` (``encoder``, ``graph``, ``f_theta``,
        ``phi``, ``ann``, ...) are :func:`~isorag_pyg.index.build.build_index`'s."""
        from isorag_pyg.index.build import build_index

        return cls(**build_index(passages, **options))

    def _fields(self) -> dict[str, Any]:
        """The constructor arguments that reproduce this index (what :meth:`save` writes)."""
        return {"contents": self.contents, "encoder": self.encoder_spec, "phi": self.phi, "graph_spec": self.graph_spec,
                "f_theta": self._f_theta, "f_theta_info": self.f_theta_info, "knobs": self.knobs, "created": self.created, "ann": self._ann,
                "next_id": self.next_id, "max_tokens": self.max_tokens, "quarantined": self.quarantined}

    def save(self, directory: str | Path, lock_timeout: float = defaults.LOCK_TIMEOUT_S) -> Path:
        """Write the index to ``directory`` atomically (a crash leaves any previous index there intact)
        under its writer lock, waiting up to ``lock_timeout`` s; see :func:`~isorag_pyg.store.storage.save_index`."""
        self.origin = save_index(directory, lock_timeout, self.origin, **self._fields())
        return Path(directory)

    @classmethod
    def load(cls, directory: str | Path, verify: bool = True) -> ISORAGIndex:
        """Open a saved index (:func:`~isorag_pyg.store.storage.load_index`: checksums unless not ``verify``, private
        copies; the PyG graph and f_θ are built on first use, so that querying imports neither)."""
        return cls(**load_index(directory, verify))

    def info(self) -> dict[str, Any]:
        """The manifest :meth:`save` writes (no checksums): encoder, graph and its statistics, f_θ, φ, knobs, ANN, counts."""
        return {**index_manifest(**self._fields()), "generation": self.generation}

    def manifest(self) -> dict[str, Any]:
        """Deprecated: the former name of :meth:`info` (a ``DeprecationWarning``; removed in a later release)."""
        warnings.warn("ISORAGIndex.manifest() is deprecated: use ISORAGIndex.info()", DeprecationWarning, stacklevel=2)
        return self.info()

    def _take_f_theta(self, fitted: FTheta) -> None:
        self._f_theta, self.f_theta_info = fitted.encoder, fitted.info
        self.contents = self.contents.replace(z=fitted.z)
        self._phi_variants = {}

    def train_f_theta(self, config: FThetaConfig | None = None, work_dir: str | Path | None = None, logger: Any = False,
                      ckpt_path: str | Path | None = None, update_phi: bool = True) -> dict[str, float]:
        """Train f_θ on this index's graph (in the ball of curvature ``phi.curvature``; default
        config: :class:`FThetaConfig`'s), keep its weights and every passage's coordinates, and
        (``update_phi``) recompute φ; returns the held-out metrics."""
        from isorag_pyg.index.f_theta import train_f_theta

        fitted = train_f_theta(self.graph, config or FThetaConfig(), self.phi.curvature, work_dir, logger, ckpt_path)
        self._take_f_theta(fitted)
        if update_phi:
            self.set_phi(self.phi)
        return fitted.info["metrics"]

    def use_f_theta(self, encoder: PoincareEncoder) -> None:
        """Use an f_θ trained elsewhere (e.g. another index's): coordinates from its forward pass
        (φ is recomputed by :meth:`set_phi`)."""
        from isorag_pyg.index.f_theta import adopt_f_theta

        self._take_f_theta(adopt_f_theta(encoder, self.contents.graph.x, self.phi.curvature))  # an entity graph's entities too

    def set_phi(self, spec: PhiSpec) -> None:
        """Recompute and keep φ (and the bridging scores, from the same shells) under ``spec``."""
        from isorag_pyg.utils.bridging import bridging_from_ball

        log_phi = self.log_phi_for(spec)
        bridging = bridging_from_ball(self.contents.graph.edge_index, self.z, spec, num_nodes=self.contents.graph.num_nodes)
        self.phi, self.contents = spec, self.contents.replace(log_phi=log_phi, bridging=bridging)

    def set_ann(self, kind: str, params: Mapping[str, int] | None = None) -> None:
        """Build the ANN index ISO-RAG, its ablations and dense take candidates from (kept by :meth:`save`): FAISS
        ``"hnsw"`` (``M``, ``ef_construction``, ``ef_search``) or ``"ivf"`` (``nlist``, ``nprobe``, ``train_size``, ``seed``),
        or ``"exact"`` to scan every passage again (defaults: :data:`~isorag_pyg.retrieval.ann.DEFAULT_PARAMS`)."""
        check_ann(kind, params)
        self._ann = None if kind == "exact" else ANNIndex.build(self.embeddings, kind, params)

    def set_knobs(self, name: str, knobs: Mapping[str, Any]) -> None:
        """Store tuned knobs for a retriever (kept by :meth:`save`)."""
        check_retriever_name(name)
        self.retriever(name, device="cpu", **knobs)  # validates them
        self.knobs[name] = dict(knobs)

    def _updatable(self) -> Updatable:
        from isorag_pyg.index.update import Updatable

        self.contents = self.contents.with_data()  # updates work on PyG's Data
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
        from isorag_pyg.encoders.spec import check_encoder, encoder_from_spec
        from isorag_pyg.index.update import added

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
        from isorag_pyg.index.update import removed

        contents, ann, report = removed(self._updatable(), ids)
        self._take_update(contents, ann)
        self.quarantined = [i for i in self.quarantined if self.passages.row_of(i) is not None]
        return report

    def quarantine(self, ids: Iterable[str], release: bool = False) -> list[str]:
        """Leave these passages out of every walk until they are released (``release=True``
        releases them); kept by :meth:`save`. Returns the ids quarantined now. An unknown id is an error."""
        from isorag_pyg.store.passages import rows_of

        ids = [self.passages[r].id for r in rows_of(self.passages, ids, "quarantine").tolist()]
        self.quarantined = [i for i in self.quarantined if i not in ids] if release else list(dict.fromkeys([*self.quarantined, *ids]))
        self._drop_caches()
        return self.quarantined

    def bridges(self, top: int = 10, ids: Iterable[str] | None = None) -> list[Bridge]:
        """The ``top`` passages by bridging score (or the passages ``ids``), highest first, with what
        they tie together and whether the walk leaves them out (:func:`~isorag_pyg.index.bridges.strongest_bridges`)."""
        from isorag_pyg.index.bridges import strongest_bridges
        from isorag_pyg.index.registry import resolve_knobs
        from isorag_pyg.store.passages import rows_of
        from isorag_pyg.utils.isoperimetric import log_volumes_of

        rows = None if ids is None else rows_of(self.passages, ids, "bridges").tolist()
        share = resolve_knobs("iso", self.knobs, {})[0].bridge_share
        graph = self.contents.graph
        log_vol = log_volumes_of(self.z, self.phi, graph.num_nodes)
        return strongest_bridges(self.passages, graph, log_vol, self.phi, self.bridging, share, self.quarantined, top, rows)


def open_index(directory: str | Path, verify: bool = True) -> ISORAGIndex:
    """An index opened to answer questions, as ``isorag query`` opens it (and as a reader built on
    retrieval should): :meth:`ISORAGIndex.load`, whose queries import neither PyG nor Lightning nor
    geoopt, with questions embedded by the model's exported ONNX file through ONNX Runtime and
    ``tokenizers`` (:func:`~isorag_pyg.encoders.exported.exported_encoder`: no sentence-transformers
    import) where that gives the recorded fingerprint, else by the recorded encoder, loaded on first use."""
    index = ISORAGIndex.load(directory, verify)
    if (encoder := exported_encoder(index.encoder_spec)) is not None:
        index.encoder = encoder
    return index
