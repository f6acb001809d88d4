"""The ISO-RAG index: passages, embeddings, corpus graph, f_θ's ball coordinates, φ and tuned
knobs, built, saved and loaded in one place. Retrievers, jobs, the CLI and the server are thin
around it."""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import inspect
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor
from torch_geometric.data import Data
from tqdm.auto import tqdm

import isorag_pyg
from isorag_pyg.datasets.corpus_files import (
    DEFAULT_MAX_TOKENS,
    load_corpus,
    tokenizer_counter,
)
from isorag_pyg.datasets.formats import RawPassage
from isorag_pyg.datasets.loader import build_corpus
from isorag_pyg.datasets.types import (
    MatchReport,
    Passage,
    QADataset,
    train_eval_overlap,
)
from isorag_pyg.encoders import SentenceEncoder, TextEncoder
from isorag_pyg.encoders.sentence import DEFAULT_ENCODER, resolve_model
from isorag_pyg.graph import (
    BUILDER_NAMES,
    EmptyGraphError,
    build_corpus_graph,
    graph_statistics,
    run_builders,
)
from isorag_pyg.graph.auto import auto_graph, describe_graph, graph_knobs
from isorag_pyg.graph.entity_graph import attach_entity_nodes
from isorag_pyg.index.passages import PassageStore, write_passages
from isorag_pyg.index.storage import (
    FORMAT_VERSION,
    IndexFormatError,
    read_manifest,
    write_index_dir,
)
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.retrieval import (
    ANNIndex,
    BM25Retriever,
    DenseRetriever,
    GlobalPPRRetriever,
    GraphIndex,
    ISORetriever,
    Queries,
    Retriever,
)
from isorag_pyg.retrieval.ann import check_ann, resolve_params
from isorag_pyg.training.config import FThetaConfig

if TYPE_CHECKING:
    from isorag_pyg.index.update import UpdateReport
from isorag_pyg.utils.device import device_of
from isorag_pyg.utils.isoperimetric import PhiSpec, log_phi_from_ball

log = logging.getLogger(__name__)

#: Retriever names an index serves: ISO-RAG, its φ ablations, and the baselines.
RETRIEVERS = ("iso", "iso_uniform", "iso_shuffled", "iso_random", "dense", "bm25", "ppr")


def check_retriever_name(name: str) -> None:
    """``ValueError`` unless ``name`` is one of :data:`RETRIEVERS`."""
    if name not in RETRIEVERS:
        raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(RETRIEVERS)}")


def check_questions(questions: Sequence[str]) -> None:
    """``ValueError`` unless ``questions`` is a non-empty list of non-blank, valid Unicode strings."""
    if isinstance(questions, str) or not isinstance(questions, Sequence) or not questions:
        raise ValueError("questions must be a non-empty list of strings")
    for i, question in enumerate(questions):
        if not isinstance(question, str):
            raise ValueError(f"question {i} must be a string, got {type(question).__name__}")
        if not question.strip():
            raise ValueError(f"question {i} is empty")
        if not question.isascii():
            try:
                question.encode()
            except UnicodeEncodeError:
                raise ValueError(f"question {i} is not valid Unicode (a lone surrogate)") from None
TENSORS, PASSAGES, F_THETA, ANN = "tensors.safetensors", "passages.jsonl", "f_theta.safetensors", "ann.safetensors"
ENTITIES = "entities.json"  # an entity graph's entity node names (rows after the passages)


@dataclass(frozen=True)
class RetrievedPassage:
    """One retrieved passage with its score (higher is better)."""

    id: str
    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def corpus_hash(passages: Iterable[Passage]) -> str:
    """Identifies a corpus: its passages' ids, titles and texts, in order."""
    digest = hashlib.sha256()
    for p in passages:
        for part in (p.id, p.title, p.text):
            encoded = part.encode()
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()


def as_passages(passages: Sequence[Passage | Mapping[str, Any]], id_offset: int = 0) -> list[Passage]:
    """Passages from ``Passage`` objects or dicts with ``text`` (and ``title``, ``id``): empty texts
    and conflicting ids are errors, identical (title, text) pairs are merged (and logged); without
    ids, passages are numbered from ``id_offset``."""
    if not passages:
        raise ValueError("cannot build an index over no passages")
    raw = []
    for i, p in enumerate(passages):
        if isinstance(p, Passage):
            raw.append(RawPassage(p.id, p.title, p.text))
            continue
        if not isinstance(p, Mapping) or not isinstance(p.get("text"), str):
            raise ValueError(f"passage {i}: expected a Passage or a dict with a 'text' string, got {p!r:.80}")
        pid = p.get("id")
        raw.append(RawPassage(None if pid is None else str(pid), str(p.get("title") or "").strip(), " ".join(p["text"].split())))
    for i, p in enumerate(raw):
        if not p.text:
            raise ValueError(f"passage {i} ({p.id or p.title!r}) has an empty text")
    report = MatchReport()
    corpus = build_corpus(raw, "passages", report, id_offset)
    if report.duplicate_passages:
        log.warning("%d duplicate passages (same title and text) merged", report.duplicate_passages)
    return corpus


class ISORAGIndex:
    """An ISO-RAG index over a corpus.

    Build one with :meth:`build` (from passages, or :meth:`read_corpus` of a file or folder),
    keep it with :meth:`save` and open it with :meth:`load`; :meth:`retrieve` answers questions,
    :meth:`retriever` gives the retrievers themselves, :meth:`explain` draws a question's
    local graph.

    Example:
        >>> passages = [{"title": "Paris", "text": "Paris is the capital of France."},
        ...             {"title": "Dijon", "text": "Dijon is a city in France known for mustard."}]
        >>> index = ISORAGIndex.build(passages, f_theta=None, phi=PhiSpec(p=0), progress=False)
        >>> [hit.title for hit in index.retrieve(["Which city is known for mustard?"], k=2)[0]]
        ['Dijon', 'Paris']
    """

    def __init__(
        self,
        passages: PassageStore,
        embeddings: Tensor,
        graph: Data,
        encoder: dict[str, Any],
        phi: PhiSpec,
        log_phi: Tensor,
        graph_spec: dict[str, Any],
        statistics: dict[str, Any],
        corpus_hash: str,
        z: Tensor | None = None,
        f_theta: PoincareEncoder | None = None,
        f_theta_info: dict[str, Any] | None = None,
        knobs: dict[str, dict[str, Any]] | None = None,
        created: str | None = None,
        knn_edges: Tensor | None = None,
    ):
        self.passages, self.embeddings, self.graph = passages, embeddings, graph
        self.encoder_spec, self.phi, self.log_phi = encoder, phi, log_phi
        self.graph_spec, self.statistics, self.corpus_hash = graph_spec, statistics, corpus_hash
        self.z, self.f_theta, self.f_theta_info = z, f_theta, f_theta_info
        self.knobs: dict[str, dict[str, Any]] = knobs or {}
        self.knn_edges = knn_edges  # the k-NN builder's directed lists, kept for updates
        self.created = created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self._encoder: SentenceEncoder | None = None
        self._graph_index: dict[torch.device, GraphIndex] = {}
        self._phi_variants: dict[PhiSpec, Tensor] = {phi: log_phi} if log_phi.numel() == graph.num_nodes else {}
        self._bm25: BM25Retriever | None = None
        self.ann_info: dict[str, Any] = {"kind": "exact", "params": {}}
        self._ann: ANNIndex | None = None
        self._ann_file: Path | None = None  # an opened index reads its ANN from here on first use

    # ----------------------------------------------------------------------------- building
    @staticmethod
    def read_corpus(path: str | Path, max_tokens: int = DEFAULT_MAX_TOKENS, encoder: str | None = DEFAULT_ENCODER) -> list[Passage]:
        """Passages from a JSON / JSON-lines / CSV file, any dataset file, or a folder of
        ``.txt`` / ``.md`` documents split at paragraphs into at most ``max_tokens`` tokens of
        ``encoder``'s tokenizer (``None``: words). Skipped files are counted and logged."""
        counter = tokenizer_counter(resolve_model(encoder)) if encoder is not None and Path(path).is_dir() else None
        passages, _ = load_corpus(path, max_tokens, counter)
        return passages

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage | Mapping[str, Any]],
        encoder: str | TextEncoder = DEFAULT_ENCODER,
        graph: Mapping[str, Mapping[str, Any] | None] | None = None,
        f_theta: FThetaConfig | PoincareEncoder | None | str = "auto",
        phi: PhiSpec = PhiSpec(),
        questions: QADataset | None = None,
        train_questions: QADataset | None = None,
        work_dir: str | Path | None = None,
        logger: Any = False,
        ckpt_path: str | Path | None = None,
        progress: bool = True,
        ann: str = "exact",
        ann_params: Mapping[str, int] | None = None,
    ) -> "ISORAGIndex":
        """Embed ``passages``, build the corpus graph, train f_θ, compute φ and (optionally) an
        approximate nearest-neighbour index.

        Args:
            passages: ``Passage`` objects or dicts with ``title``, ``text`` and optionally ``id``.
            encoder: a sentence-transformers name or path, or an encoder object (a
                :class:`SentenceEncoder`, or anything with ``name``, ``fingerprint`` and
                ``encode``) (default: the bundled all-MiniLM-L6-v2, offline; embeddings are cached).
            graph: builder name -> arguments (default: chosen by what the corpus supports,
                :func:`~isorag_pyg.graph.auto.auto_graph`; see :func:`~isorag_pyg.graph.run_builders`).
            f_theta: how f_θ is trained, or an f_θ already trained (used as it is); ``None``:
                no f_θ (then ``phi.p`` must be 0); ``"auto"``: the default training when ``phi``
                needs coordinates (``p > 0``), else none. (default: ``"auto"``)
            phi: the φ recipe (default: :class:`PhiSpec`'s).
            questions, train_questions: only for the co-occurrence graph builders.
            work_dir, logger, ckpt_path: f_θ checkpoints directory, Lightning logger, resume.
            progress: show progress bars.
            ann, ann_params: where ISO-RAG and dense take their candidates: ``"exact"`` (scan
                every passage) or a FAISS ``"hnsw"`` / ``"ivf"`` index with these parameters
                (default: ``"exact"``; see :meth:`set_ann`).
        """
        corpus = as_passages(passages)
        if isinstance(f_theta, str):
            if f_theta != "auto":
                raise ValueError(f"f_theta must be an FThetaConfig, a PoincareEncoder, None or 'auto', got {f_theta!r}")
            f_theta = FThetaConfig() if phi.needs_coordinates else None
        resolve_params(ann, ann_params, len(corpus))  # bad ANN arguments fail before minutes of encoding
        if f_theta is None and phi.needs_coordinates:
            raise ValueError(f"φ with p = {phi.p} needs f_θ: pass f_theta=FThetaConfig() or phi=PhiSpec(p=0)")
        spec = {name: dict(kwargs or {}) for name, kwargs in (graph if graph is not None else auto_graph(corpus)).items()}
        if unknown := [name for name in spec if name not in BUILDER_NAMES]:  # before minutes of encoding
            raise ValueError(f"unknown graph builder {unknown[0]!r}; choose from {', '.join(BUILDER_NAMES)}")
        with tqdm(total=3 + (f_theta is not None) + (ann != "exact"), desc="index", disable=not progress, leave=False) as stages:
            stages.set_postfix_str("encoding passages")
            encoder = SentenceEncoder(encoder, show_progress=progress) if isinstance(encoder, str) else encoder
            x = encoder.encode([p.content for p in corpus])
            stages.update()
            stages.set_postfix_str("graph")
            edges = run_builders(spec, corpus, x, eval_questions=questions, train_questions=train_questions)
            data = build_corpus_graph(corpus, x, edges)
            if data.edge_index.numel() == 0 and f_theta is not None and not isinstance(f_theta, PoincareEncoder):
                raise EmptyGraphError(f"the graph builders ({', '.join(spec)}) found no edge in this corpus: f_θ needs edges to "
                                      "learn from; use phi=PhiSpec(p=0) and f_theta=None, or another graph")
            if "train_cooccurrence" in spec and train_eval_overlap(questions, train_questions):
                log.warning("training questions are also evaluation questions: train_cooccurrence LEAKS")
                data.leak = True
            stages.update()
            index = cls(
                PassageStore(corpus), x, data, {"name": encoder.name, "fingerprint": encoder.fingerprint, "dim": int(x.size(1))}, phi,
                torch.empty(0), spec, {**graph_statistics(data), "builders": list(data.builders)}, corpus_hash(corpus),
                knn_edges=edges.get("knn"), knobs=graph_knobs(spec),
            )
            if isinstance(f_theta, PoincareEncoder):
                index.use_f_theta(f_theta)
            elif f_theta is not None:
                stages.set_postfix_str("training f_θ")
                index.train_f_theta(f_theta, work_dir, logger, ckpt_path, update_phi=False)
                stages.update()
            stages.set_postfix_str("φ")
            index.set_phi(phi)
            stages.update()
            if ann != "exact":
                stages.set_postfix_str(f"ANN ({ann})")
                index.set_ann(ann, ann_params)
                stages.update()
        for line in describe_graph(index.statistics):  # a warning when most passages are isolated is logged as one
            log.info(line)
        if index.leak:
            log.warning("LEAK: this graph is built from the evaluated questions' own contexts; its metrics are not held-out results")
        return index

    def train_f_theta(self, config: FThetaConfig = FThetaConfig(), work_dir: str | Path | None = None, logger: Any = False,
                      ckpt_path: str | Path | None = None, update_phi: bool = True) -> dict[str, float]:
        """Train f_θ on this index's graph (in the ball of curvature ``phi.curvature``), keep its
        weights and every passage's coordinates, and recompute φ; returns the held-out metrics."""
        from isorag_pyg.training.fit import (
            fit_f_theta,  # Lightning: imported only to train
        )

        fit = fit_f_theta(self.graph, config, self.phi.curvature, work_dir, logger, ckpt_path)
        self.f_theta, self.z = fit.encoder, fit.z
        self.f_theta_info = {
            "config": config.to_dict(), "metrics": fit.metrics, "checkpoint": fit.checkpoint,
            "architecture": {"in_dim": fit.encoder.in_dim, "out_dim": fit.encoder.out_dim, "hidden_dim": fit.encoder.hidden_dim},
        }
        self._phi_variants = {}
        if update_phi:
            self.set_phi(self.phi)
        return fit.metrics

    def use_f_theta(self, encoder: PoincareEncoder) -> None:
        """Use an f_θ trained elsewhere (e.g. another index's): coordinates from its forward pass."""
        if encoder.in_dim != self.embeddings.size(1) or encoder.curvature != self.phi.curvature:
            raise ValueError(f"f_θ takes {encoder.in_dim}-d embeddings in a ball of curvature {encoder.curvature}; this index has "
                             f"{self.embeddings.size(1)}-d embeddings and φ curvature {self.phi.curvature}")
        self.f_theta, self.z = encoder.eval(), encoder.eval().embed_all(self.graph.x.float())  # an entity graph's entities too
        self.f_theta_info = {"config": None, "metrics": None, "checkpoint": None,
                             "architecture": {"in_dim": encoder.in_dim, "out_dim": encoder.out_dim, "hidden_dim": encoder.hidden_dim}}
        self._phi_variants = {}

    # ----------------------------------------------------------------------------- updates
    def add(self, passages: Sequence[Passage | Mapping[str, Any]], refit: FThetaConfig | None = None,
            encoder: TextEncoder | None = None) -> "UpdateReport":
        """Append passages: embedded with the index's encoder (cached; or ``encoder``, e.g. the
        same model on a GPU, checked against the recorded fingerprint), linked by the graph
        builders in both directions, placed in the ball by the stored f_θ (``refit`` trains f_θ
        again on the new graph instead), with φ recomputed around them. Equals a rebuild over
        the same passages with the same f_θ. A conflicting id is an error; a passage identical
        to one in the index is skipped (counted)."""
        from isorag_pyg.index.update import UpdateReport, apply_update, check_updatable, new_passages

        check_updatable(self)
        fresh, skipped = new_passages(self, passages)
        report = UpdateReport(added=len(fresh), duplicates_skipped=skipped)
        if fresh:
            encoder = encoder or SentenceEncoder(self.encoder_spec["name"], show_progress=False)
            self._check_encoder(encoder)
            x = torch.cat([self.embeddings.float(), encoder.encode([p.content for p in fresh])])
            apply_update(self, list(self.passages) + fresh, x, torch.arange(len(self)), report)
        if refit is not None:
            self.train_f_theta(refit)
            report.phi_recomputed = len(self)
        return report

    def remove(self, ids: Iterable[str]) -> "UpdateReport":
        """Remove passages by id; the graph, the ball coordinates of the rest and φ around the
        removed passages are updated as a rebuild would. An unknown id is an error."""
        from isorag_pyg.index.update import UpdateReport, apply_update, check_updatable, rows_of

        check_updatable(self)
        rows = rows_of(self, ids)
        if rows.numel() == len(self):
            raise ValueError("cannot remove every passage of an index")
        keep = torch.ones(len(self), dtype=torch.bool)
        keep[rows] = False
        old_to_new = torch.full((len(self),), -1, dtype=torch.long)
        old_to_new[keep] = torch.arange(int(keep.sum()))
        report = UpdateReport(removed=rows.numel())
        corpus = [p for p, k in zip(self.passages, keep.tolist()) if k]
        apply_update(self, corpus, self.embeddings[keep].float(), old_to_new, report)
        return report

    def replace_contents(self, corpus: list[Passage], x: Tensor, graph: Data, z: Tensor | None, log_phi: Tensor,
                         knn_edges: Tensor | None, statistics: dict[str, Any], ann: ANNIndex | None) -> None:
        """Swap in an updated corpus (see :mod:`isorag_pyg.index.update`); caches are dropped."""
        self.passages, self.embeddings, self.graph, self.z, self.log_phi = PassageStore(corpus), x, graph, z, log_phi
        self.knn_edges, self.statistics, self.corpus_hash = knn_edges, statistics, corpus_hash(corpus)
        if ann is not None:
            self._ann, self.ann_info = ann, {"kind": ann.kind, "params": ann.params}
        self._graph_index, self._phi_variants, self._bm25 = {}, {self.phi: log_phi}, None

    def set_phi(self, spec: PhiSpec) -> None:
        """Recompute and keep φ under ``spec`` (the φ that retrieval uses and :meth:`save` writes)."""
        self.phi, self.log_phi = spec, self.log_phi_for(spec)

    def log_phi_for(self, spec: PhiSpec) -> Tensor:
        """φ under another recipe (e.g. ``p = 0`` as a control), from the stored coordinates."""
        if spec.curvature != self.phi.curvature and spec.needs_coordinates:
            raise ValueError(f"f_θ was trained in a ball of curvature {self.phi.curvature}, not {spec.curvature}")
        if spec not in self._phi_variants:
            if spec.needs_coordinates and self.z is None:
                raise ValueError(f"φ with p = {spec.p} needs f_θ's coordinates, and this index has none (built with p = 0); "
                                 "rebuild it with f_θ or use p = 0")
            self._phi_variants[spec] = log_phi_from_ball(self.graph.edge_index, self.z, spec, num_nodes=self.graph.num_nodes)
        return self._phi_variants[spec]

    def set_ann(self, kind: str = "hnsw", params: Mapping[str, int] | None = None) -> None:
        """Build the approximate nearest-neighbour index that ISO-RAG (and its ablations) and
        dense take their candidates from, kept by :meth:`save`: FAISS ``"hnsw"`` (``M``,
        ``ef_construction``, ``ef_search``) or ``"ivf"`` (``nlist``, ``nprobe``, ``train_size``,
        ``seed``), or ``"exact"`` to scan every passage again (default parameters:
        :data:`~isorag_pyg.retrieval.ann.DEFAULT_PARAMS`)."""
        check_ann(kind, params)
        self._ann = None if kind == "exact" else ANNIndex.build(self.embeddings, kind, params)
        self._ann_file = None
        self.ann_info = {"kind": kind, "params": {} if self._ann is None else self._ann.params}  # shared with the ANN

    @property
    def ann(self) -> ANNIndex | None:
        """The approximate nearest-neighbour index (``None``: exact scan); an opened index reads
        it from its file on first use."""
        if self._ann is None and self._ann_file is not None:
            try:
                ann = ANNIndex.load(self._ann_file)
            except Exception as err:  # safetensors' or FAISS's own errors
                raise IndexFormatError(self._ann_file, f"unreadable ANN index ({err})") from None
            if (ann.kind, ann.num_passages, ann.dim) != (self.ann_info["kind"], len(self), self.embeddings.size(1)):
                raise IndexFormatError(self._ann_file, f"a {ann.kind} index of {ann.num_passages} vectors of size {ann.dim}, "
                                                       f"not the manifest's {self.ann_info['kind']} over {len(self)} passages")
            self._ann, self._ann_file = ann, None
            self.ann_info = {"kind": ann.kind, "params": ann.params}  # shared: set_search shows in the manifest
        return self._ann

    # ----------------------------------------------------------------------------- properties
    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return (f"ISORAGIndex({len(self)} passages, {self.statistics.get('edges', 0)} edges, graph={'+'.join(self.graph_spec)}, "
                f"encoder={self.encoder_spec['name']}, f_theta={'yes' if self.z is not None else 'no'}, phi={self.phi})")

    @property
    def leak(self) -> bool:
        return bool(self.statistics.get("leak", False))

    @property
    def encoder(self) -> TextEncoder:
        """The encoder the passages were embedded with (loaded on first use, checked against the
        fingerprint recorded at build time)."""
        if self._encoder is None:
            encoder = SentenceEncoder(self.encoder_spec["name"], cache_dir=None, show_progress=False)
            self._check_encoder(encoder)
            self._encoder = encoder
        return self._encoder

    def _check_encoder(self, encoder: TextEncoder) -> None:
        if encoder.fingerprint != self.encoder_spec["fingerprint"]:
            raise ValueError(f"the encoder {self.encoder_spec['name']!r} differs from the one this index was built with "
                             "(fingerprint mismatch): rebuild the index, or set index.encoder to a matching SentenceEncoder")

    @encoder.setter
    def encoder(self, encoder: TextEncoder) -> None:
        self._encoder = encoder

    def graph_index(self, device: str | torch.device = "auto") -> GraphIndex:
        """The corpus graph prepared for retrieval on ``device`` (built once per device)."""
        device = device_of(device)
        if device not in self._graph_index:
            nodes = self.embeddings if self.graph.num_nodes == len(self) else self.graph.x  # an entity graph's entities follow
            self._graph_index[device] = GraphIndex(self.graph.edge_index, nodes, device, normalized=True,
                                                   edge_weight=self.graph.edge_weight, num_passages=len(self))
        return self._graph_index[device]

    # ----------------------------------------------------------------------------- retrieval
    def retriever(self, name: str = "iso", device: str | torch.device = "auto", **knobs: Any) -> Retriever:
        """A retriever over this index: ``iso`` (ISO-RAG), its φ ablations ``iso_uniform``,
        ``iso_shuffled``, ``iso_random``, or the baselines ``dense``, ``bm25``, ``ppr``.

        Knobs are the retriever's keyword arguments; those not given come from the knobs stored
        in the index (:meth:`set_knobs`), then the retriever's defaults. ISO-RAG also takes ``p``,
        ``eps`` and ``shell_floor``, which override the index's φ recipe for this retriever.
        ISO-RAG, its ablations and dense take their candidates from the index's :attr:`ann`.
        """
        check_retriever_name(name)
        stored = self.knobs.get(name, self.knobs.get("iso", {}) if name.startswith("iso_") else {})  # ablations share ISO-RAG's knobs
        knobs = {**stored, **knobs}
        if name == "bm25":
            if knobs:
                return BM25Retriever([p.content for p in self.passages], **_check_knobs(BM25Retriever, knobs, name))
            if self._bm25 is None:  # the default one is built once: indexing the corpus costs
                self._bm25 = BM25Retriever([p.content for p in self.passages])
            return self._bm25
        index = self.graph_index(device)
        if name == "dense":
            retriever: Retriever = DenseRetriever(index, **_check_knobs(DenseRetriever, knobs, name), ann=self.ann)
        elif name == "ppr":
            retriever = GlobalPPRRetriever(index, **_check_knobs(GlobalPPRRetriever, knobs, name))
        else:
            if name != "iso":
                knobs["phi_mode"] = name.removeprefix("iso_")
            overrides = {key: float(knobs.pop(key)) for key in ("p", "eps", "shell_floor") if key in knobs}
            log_phi = self.log_phi_for(self.phi.replace(**overrides)) if overrides else self.log_phi
            retriever = ISORetriever(index, log_phi, **_check_knobs(ISORetriever, knobs, name), ann=self.ann)
        retriever.name = name
        return retriever

    def set_knobs(self, name: str, knobs: Mapping[str, Any]) -> None:
        """Store tuned knobs for a retriever (kept by :meth:`save`)."""
        check_retriever_name(name)
        self.retriever(name, device="cpu", **knobs)  # validates them
        self.knobs[name] = dict(knobs)

    def encode_questions(self, questions: Sequence[str]) -> Queries:
        check_questions(questions)
        return Queries(list(questions), self.encoder.encode(list(questions)))

    def retrieve(self, questions: Sequence[str], k: int = 5, retriever: str = "iso", **knobs: Any) -> list[list[RetrievedPassage]]:
        """The top ``k`` passages for every question, best first, with their scores."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        queries = self.encode_questions(questions)
        result = self.retriever(retriever, **knobs).retrieve(queries, k)
        return self.hits(result.indices, result.scores)

    def hits(self, indices: Tensor, scores: Tensor) -> list[list[RetrievedPassage]]:
        """Corpus rows and scores as passages."""
        out = []
        for rows, values in zip(indices.tolist(), scores.tolist()):
            out.append([RetrievedPassage(p.id, p.title, p.text, float(s)) for p, s in ((self.passages[r], s) for r, s in zip(rows, values) if r >= 0)])
        return out

    def explain(self, question: str, png_path: str | Path | None = None, k: int = 10, **knobs: Any) -> dict[str, Any]:
        """ISO-RAG's trace for one question (seeds, candidates, kept and pruned edges, PPR mass,
        top k; passages by id) and, with ``png_path``, the case-study picture of its local graph."""
        from isorag_pyg.evaluation.case_study import plot_case_study

        queries = self.encode_questions([question])
        trace = self.retriever("iso", **knobs).retrieve(queries, k, trace=True).traces[0]
        rows = sorted(set(trace["candidates"]))
        records = dict(zip(rows, self.node_records(rows)))
        titles = {r: title for r, (_, title, _) in records.items()}
        if png_path is not None:
            plot_case_study(trace, set(), titles, question, png_path)
        ids = {r: pid for r, (pid, _, _) in records.items()}
        return {
            "question": question,
            "seeds": [ids[r] for r in trace["seeds"]],
            "candidates": [ids[r] for r in trace["candidates"]],
            "kept_edges": [[ids[u], ids[v]] for u, v in trace["kept_edges"]],
            "pruned_edges": [[ids[u], ids[v]] for u, v in trace["pruned_edges"]],
            "ppr": {ids[r]: mass for r, mass in trace["ppr"].items()},
            "top": [{"id": ids[r], "title": titles[r], "score": score} for r, score in trace["top"]],
        }

    def node_records(self, rows: Iterable[int]) -> list[tuple[str, str, str]]:
        """(id, title, text) of graph nodes: a passage's own, or an entity graph's entity node's
        (``"entity:<name>"``, name, ``""``)."""
        names = getattr(self.graph, "entity_names", [])
        out = []
        for r in rows:
            if r < len(self):
                p = self.passages[r]
                out.append((p.id, p.title, p.text))
            else:
                out.append((f"entity:{names[r - len(self)]}", names[r - len(self)], ""))
        return out

    # ----------------------------------------------------------------------------- storage
    def manifest(self) -> dict[str, Any]:
        """What :meth:`save` records about the index (without the file checksums)."""
        return {
            "format_version": FORMAT_VERSION,
            "package": "isorag_pyg",
            "package_version": isorag_pyg.__version__,
            "created": self.created,
            "encoder": self.encoder_spec,
            "graph": {"builders": self.graph_spec, "statistics": self.statistics},
            "f_theta": self.f_theta_info,
            "phi": dataclasses.asdict(self.phi),
            "knobs": self.knobs,
            "ann": self.ann_info,
            "counts": {"passages": len(self), "entities": len(getattr(self.graph, "entity_names", [])),
                       "edges": int(self.graph.edge_index.size(1)), "dim": int(self.embeddings.size(1))},
            "corpus_hash": self.corpus_hash,
        }

    def save(self, directory: str | Path) -> Path:
        """Write the index to ``directory`` atomically (a crash leaves any previous index there
        intact): ``manifest.json``, ``passages.jsonl``, ``tensors.safetensors`` and, with f_θ,
        ``f_theta.safetensors``, with an ANN index ``ann.safetensors``."""

        def write(tmp: Path) -> dict[str, Any]:
            offsets = write_passages(self.passages, tmp / PASSAGES)
            tensors = {
                "embeddings": self.embeddings.float().contiguous(), "passage_offsets": offsets,
                "edge_index": self.graph.edge_index.long().contiguous(), "edge_weight": self.graph.edge_weight.float().contiguous(),
                "edge_source": self.graph.edge_source.long().contiguous(), "log_phi": self.log_phi.double().contiguous(),
            }
            if self.z is not None:
                tensors["z"] = self.z.float().contiguous()
            if self.knn_edges is not None:
                tensors["knn_edges"] = self.knn_edges.long().contiguous()
            save_file(tensors, tmp / TENSORS)
            if self.f_theta is not None:
                save_file({k: v.contiguous() for k, v in self.f_theta.state_dict().items()}, tmp / F_THETA)
            if self.ann is not None:
                self.ann.save(tmp / ANN)
            if names := getattr(self.graph, "entity_names", []):
                (tmp / ENTITIES).write_text(json.dumps(names, ensure_ascii=False))
            return self.manifest()

        return write_index_dir(directory, write)

    @classmethod
    def load(cls, directory: str | Path, verify: bool = True) -> "ISORAGIndex":
        """Open a saved index. Every file's size is checked and, unless ``verify`` is ``False``
        (for huge trusted indexes), its SHA-256; tensors are memory-mapped. Raises
        :class:`IndexFormatError` naming the file for anything missing, corrupt or too new."""
        directory = Path(directory)
        manifest = read_manifest(directory, verify)
        try:
            return cls._from_files(directory, manifest)
        except IndexFormatError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise IndexFormatError(directory, f"inconsistent index ({err})") from None

    @classmethod
    def _from_files(cls, directory: Path, manifest: dict[str, Any]) -> "ISORAGIndex":
        tensors = _load_tensors(directory / TENSORS)
        counts = manifest["counts"]
        n, dim, num_nodes = int(counts["passages"]), int(counts["dim"]), int(counts["passages"]) + int(counts.get("entities", 0))
        expected = {"embeddings": (n, dim), "passage_offsets": (n + 1,), "log_phi": (num_nodes,), "edge_index": (2, int(counts["edges"]))}
        for key, shape in expected.items():
            if key not in tensors or tuple(tensors[key].shape) != shape:
                raise IndexFormatError(directory / TENSORS, f"'{key}' missing or not of shape {shape}")
        edge_index = tensors["edge_index"]
        if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
            raise IndexFormatError(directory / TENSORS, "edge_index refers to entity nodes or passages that do not exist")
        passages = PassageStore(path=directory / PASSAGES, offsets=tensors["passage_offsets"])
        statistics = manifest["graph"]["statistics"]
        graph = Data(x=tensors["embeddings"], edge_index=edge_index, edge_weight=tensors["edge_weight"],
                     edge_source=tensors["edge_source"], num_nodes=n)
        attach_entity_nodes(graph, json.loads((directory / ENTITIES).read_text()) if num_nodes > n else [])
        graph.builders, graph.leak = list(statistics.get("builders", manifest["graph"]["builders"])), bool(statistics.get("leak", False))
        phi = PhiSpec(**manifest["phi"])
        f_theta, info = None, manifest.get("f_theta")
        if info is not None:
            arch = info["architecture"]
            f_theta = PoincareEncoder(arch["in_dim"], arch["out_dim"], arch["hidden_dim"], phi.curvature)
            f_theta.load_state_dict(_load_tensors(directory / F_THETA))
            f_theta.eval()
            if "z" not in tensors or tuple(tensors["z"].shape) != (num_nodes, arch["out_dim"]):
                raise IndexFormatError(directory / TENSORS, f"'z' missing or not of shape {(num_nodes, arch['out_dim'])}")
        index = cls(passages, tensors["embeddings"], graph, manifest["encoder"], phi, tensors["log_phi"], manifest["graph"]["builders"],
                    statistics, manifest["corpus_hash"], tensors.get("z"), f_theta, info, manifest.get("knobs", {}),
                    manifest.get("created"), tensors.get("knn_edges"))
        index.ann_info = manifest.get("ann", index.ann_info)
        if index.ann_info["kind"] != "exact":
            if ANN not in manifest.get("files", {}):
                raise IndexFormatError(directory / ANN, f"missing: the manifest names a {index.ann_info['kind']} ANN index")
            index._ann_file = directory / ANN
        return index

    def info(self) -> dict[str, Any]:
        """The manifest's content: encoder, graph builders and statistics, f_θ, φ, knobs, counts."""
        return self.manifest()


def _load_tensors(path: Path) -> dict[str, Tensor]:
    try:
        return load_file(path)
    except Exception as err:  # safetensors' own errors: truncated header, bad offsets...
        raise IndexFormatError(path, f"unreadable safetensors file ({err})") from None


def _check_knobs(cls: type, knobs: dict[str, Any], name: str) -> dict[str, Any]:
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "index", "log_phi", "texts", "ann")]
    unknown = sorted(set(knobs) - set(allowed))
    if unknown:
        extra = ", p, eps, shell_floor" if cls is ISORetriever else ""
        raise ValueError(f"unknown knob(s) {', '.join(unknown)} for retriever {name!r}; it takes {', '.join(allowed)}{extra}")
    return knobs
