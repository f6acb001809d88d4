r"""Every tunable default in one place: frozen dataclasses for φ's recipe and each retriever.

Retrievers take them, an index stores the ones a user set (:meth:`ISORAGIndex.set_knobs`); the ``retriever`` configs, the docs'
knob table and the command's help are checked against them by one test. This module imports nothing from the package.

``alpha`` is the probability of **following an edge** at each step of personalized PageRank (the damping factor of the
PageRank paper and of :func:`~isorag_pyg.utils.ppr.personalized_pagerank`). PyG's :func:`torch_geometric.utils.get_ppr` uses
the opposite convention: its ``alpha`` is the probability of **restarting**, i.e. ``1 - alpha`` here.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any

#: φ ablations: the real values, all equal (nothing pruned), real values permuted over the nodes, uniform random values.
PHI_MODES = ("real", "uniform", "shuffled", "random")


def check_beta(beta: float) -> None:
    """``ValueError`` unless the filter's ratio threshold ``beta`` lies in ``(0, 1]``."""
    if not (0.0 < beta <= 1.0) or math.isnan(beta):
        raise ValueError(f"beta must lie in (0, 1], got {beta}")


def check_alpha(alpha: float) -> None:
    """``ValueError`` unless the PPR damping ``alpha`` (probability of following an edge) lies in ``[0, 1)``."""
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must lie in [0, 1), got {alpha}")


def _type_ok(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of a knob's declared type: ``float`` takes any real number, ``int``
    a whole one, neither a ``bool``; ``X | None`` takes ``None`` too."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return any(_type_ok(value, k) for k in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind in (int, float):
        return isinstance(value, numbers.Integral if kind is int else numbers.Real) and not isinstance(value, bool)
    return isinstance(value, kind)


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class Knobs:
    """Shared behaviour of the knob dataclasses: type checks (a knob of the wrong type is a ``TypeError`` that names it),
    then each class's own :meth:`validate`; a validated copy with changes; plain dicts."""

    def __post_init__(self) -> None:
        types_ = _field_types(type(self))
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), types_[f.name]
            if not _type_ok(value, kind):
                shown = getattr(kind, "__name__", None) or str(kind)
                raise TypeError(f"{type(self).__name__}.{f.name} must be {shown}, got {value!r} ({type(value).__name__})")
        self.validate()

    def validate(self) -> None:
        """Range checks beyond the types (none by default)."""

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (validated again); ``ValueError`` names unknown ones."""
        names = [f.name for f in dataclasses.fields(self)]
        if unknown := sorted(set(changes) - set(names)):
            raise ValueError(f"unknown knob(s) {', '.join(unknown)}; {type(self).__name__} takes {', '.join(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class PhiSpec(Knobs):
    r"""The one recipe for :math:`\varphi` from ball coordinates, used by training, retrieval,
    the index and :class:`~isorag_pyg.transforms.IsoperimetricFilter` alike.

    The default ``p = 0`` (every volume 1: φ counts nodes, f_θ is not needed) was chosen with the
    retrieval knobs on the training questions across clean and noisy graphs (the noise
    benchmark): the learned hyperbolic volumes never beat node counts there. ``p > 0`` weighs
    nodes by their volume in f_θ's ball, as the ISO-RAG paper does.

    Args:
        p: volume exponent, :math:`v(u) = \lambda_c(z_u)^p`; ``0`` makes every volume 1, so
            :math:`\varphi` counts nodes and needs no coordinates. (default: ``0.0``)
        eps: the :math:`\epsilon` added to :math:`V(S_u)`. (default: ``1e-8``)
        shell_floor: added to :math:`V(\partial S_u)` in units of the volume of a node at the
            origin (:math:`2^p`), so a node whose 2-hop shell is empty gets a small finite
            :math:`\varphi` instead of 0; ``0`` is the plain definition. (default: ``8.0``)
        curvature: the ball's curvature magnitude :math:`c` (f_θ is trained in this ball).
            (default: ``1.0``)
    """

    p: float = 0.0
    eps: float = 1e-8
    shell_floor: float = 8.0
    curvature: float = 1.0

    def validate(self) -> None:
        if not (math.isfinite(self.p) and self.p >= 0):
            raise ValueError(f"the volume exponent p must be finite and >= 0, got {self.p}")
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")
        if not (math.isfinite(self.shell_floor) and self.shell_floor >= 0):
            raise ValueError(f"shell_floor must be finite and >= 0, got {self.shell_floor}")
        if not (math.isfinite(self.curvature) and self.curvature > 0):
            raise ValueError(f"curvature must be finite and > 0, got {self.curvature}")

    @property
    def needs_coordinates(self) -> bool:
        """Whether :math:`\\varphi` depends on ball coordinates (``p > 0``)."""
        return self.p != 0


#: The φ fields a retriever may override for itself (the curvature is f_θ's ball's).
PHI_OVERRIDES = ("p", "eps", "shell_floor")


@dataclass(frozen=True)
class ISOKnobs(Knobs):
    """ISO-RAG's retrieval knobs (:class:`~isorag_pyg.retrieval.ISORetriever`).

    Defaults chosen on training questions only (the benchmark docs). ``alpha`` (0.85) differs from
    global PPR's (0.5): a local graph needs longer walks.

    Args:
        num_seeds: m, seeds per query (top cosine).
        over_retrieval: X, the dense pool is ``L = X * k``.
        hops: the k-hop neighbourhood of the seeds joins the pool.
        max_expansion: hub cap: new neighbours kept per hop and query (best dense score first).
        beta: keep ``(u, v)`` iff ``min(φ_u, φ_v) / max(φ_u, φ_v) >= beta``.
        phi_mode: ``"real"`` or an ablation of :data:`PHI_MODES`, seeded by ``seed``.
        alpha: PPR's probability of following an edge (PyG's ``get_ppr`` calls ``1 - alpha`` alpha).
        tau: teleport softmax temperature over the seeds' cosines.
        lambda_graph, lambda_dense: fusion weights of ``minmax(PPR)`` and ``minmax(cosine)``.
        tol, max_iter: PPR's L1 tolerance and iteration cap.
        seed: for the ``shuffled`` and ``random`` ablations.
        query_chunk: queries per batched call (``None``: as many as fit a 256 MiB score block, at most 1024).
        edge_weights: the local PPR follows edges in proportion to the graph's edge weights.
        entity_seeds: on an entity graph, the teleport share of the entity nodes the question mentions (rule extractor, the entity
            graph's normalisation; HippoRAG's query-matched seeds), split by inverse degree; the passage seeds keep the rest (all of it
            where no entity node is named). Chosen on training questions (corpora without titles).
        reenter_entity_seeds: whether the walk keeps the edges into the query-matched entity seeds (``False``: those seeds only send
            mass out; a passage passes its mass on to the entities the question does not name, the bridge to a second passage; a
            passage left with no other edge restarts, as every dead end does). Chosen on training questions (corpora without titles).
        bridge_share: the share of passages with the highest bridging scores (:func:`~isorag_pyg.utils.bridging.bridging_score`, ablated
            as φ is) the walk leaves out, edges and unique-mention seeds, but for a question whose seed names it by a specific title
            (:meth:`~isorag_pyg.retrieval.ISORetriever.walk_left_out`); ``0``: off. Chosen on training questions (the poisoning
            benchmark, titles blank; title-mention graphs store a larger share: :data:`~isorag_pyg.graph.auto.TITLE_MENTION_KNOBS`).
        unique_mention_seeds: on an entity graph, an entity the question names that one passage alone mentions (no entity node) seeds
            that passage with weight 1 in the ``entity_seeds`` share, as an entity node of degree 1 would. HippoRAG keeps such phrase
            nodes; as nodes they only trap the walk, so the index keeps them as a lookup (``unique_mentions``) instead.
        unique_mentions_vouched: every such passage keeps its share only inside the question's dense pool or titled with the name; else
            the share goes back to the passage seeds (anyone can write a name the corpus lacks). Off: 2 points of clean Recall@5 (poisoning).
        vouch_share: the share of passages with the highest bridging scores whose unique-mention seeds need that voucher anyway: a
            passage tying many questions' names is a strong bridge, a genuine one mostly not (``0``: none; train-chosen, poisoning).
        entity_focus: how a query-matched entity seed splits its mass among the passages that mention it: in proportion to
            ``exp(entity_focus * cosine with the question)`` (``0``: evenly, as HippoRAG does): a passage that merely names it (a
            list, an injected passage) gets less. Chosen on training questions (the poisoning benchmark; it raised clean Recall@5).
        entity_gate: a passage keeps ``exp(entity_gate * (cosine - best seed cosine))`` (at most all) of a query-matched entity's
            mass, the rest restarts at the seeds: one that merely names the question's entities gets little (``0``: off; train-chosen).
        backlink_weight: the share of its transition probability at which the walk follows a one-way title mention backwards (the graph's
            ``edge_backlink``: article -> the passage naming it); the rest restarts at the seeds. A passage's author writes its mentions,
            not the mentions of it, so at ``1`` naming popular titles draws their mass. Chosen on training questions (poisoning).
        near_duplicate_cosine: a passage whose cosine with a better-ranked one of the top k reaches it goes after the rest of the best
            candidates: copies take one slot (above 1, e.g. 2: off). Chosen on training questions (poisoning: lowest with no clean cost).
        lexical_weight: a hybrid with BM25: the walk's ``L`` best and BM25's ranked by ``minmax(fused score) + lexical_weight *
            minmax(BM25)`` (``0``: off). Documentation that writes code stores 1 (:data:`~isorag_pyg.graph.auto.CODE_SPAN_KNOBS`).
    """

    num_seeds: int = 5
    over_retrieval: float = 5.0
    hops: int = 1
    max_expansion: int = 100
    beta: float = 0.2
    phi_mode: str = "real"
    alpha: float = 0.85
    tau: float = 10.0
    lambda_graph: float = 0.9
    lambda_dense: float = 0.1
    tol: float = 1e-6
    max_iter: int = 50
    seed: int = 0
    query_chunk: int | None = None
    edge_weights: bool = False
    entity_seeds: float = 0.5
    reenter_entity_seeds: bool = False
    unique_mention_seeds: bool = True
    unique_mentions_vouched: bool = False
    vouch_share: float = 0.3
    bridge_share: float = 0.02
    entity_focus: float = 20.0
    entity_gate: float = 10.0
    backlink_weight: float = 0.05
    near_duplicate_cosine: float = 0.85
    lexical_weight: float = 0.0

    def validate(self) -> None:
        if not self.near_duplicate_cosine >= -1.0:
            raise ValueError(f"near_duplicate_cosine must be a number >= -1 (above 1: off), got {self.near_duplicate_cosine}")
        if not 0.0 <= self.backlink_weight <= 1.0:
            raise ValueError(f"backlink_weight must lie in [0, 1], got {self.backlink_weight}")
        for name, top, shown in [*((name, math.inf, "be a finite number >= 0") for name in ("entity_focus", "entity_gate", "lexical_weight")),
                                 *((name, 1.0, "lie in [0, 1)") for name in ("entity_seeds", "bridge_share", "vouch_share"))]:
            if not 0.0 <= getattr(self, name) < top:
                raise ValueError(f"{name} must {shown}, got {getattr(self, name)}")
        if self.num_seeds < 1 or self.hops < 0 or self.max_expansion < 0:
            raise ValueError("num_seeds must be >= 1, hops and max_expansion >= 0")
        if self.over_retrieval < 1:
            raise ValueError(f"over_retrieval must be >= 1, got {self.over_retrieval}")
        if self.lambda_graph < 0 or self.lambda_dense < 0 or self.lambda_graph + self.lambda_dense == 0:
            raise ValueError("lambda_graph and lambda_dense must be >= 0 and not both 0")
        check_beta(self.beta)
        check_alpha(self.alpha)
        if self.phi_mode not in PHI_MODES:
            raise ValueError(f"phi mode must be one of {PHI_MODES}, got {self.phi_mode!r}")


@dataclass(frozen=True)
class PPRKnobs(Knobs):
    """Global personalized PageRank's knobs (:class:`~isorag_pyg.retrieval.GlobalPPRRetriever`),
    also the defaults of :func:`~isorag_pyg.utils.ppr.personalized_pagerank`.

    Seeds and teleport as in :class:`ISOKnobs`; the default ranks by PPR alone (``lambda_dense = 0``, ties broken by the
    dense score). ``alpha`` is 0.5, not ISO-RAG's 0.85: on the whole corpus graph a shorter walk stays nearer the seeds
    (tuned on the training questions, as ISO-RAG's). ``alpha`` follows an edge (PyG's ``get_ppr``: ``1 - alpha``).
    """

    num_seeds: int = 5
    alpha: float = 0.5
    tau: float = 10.0
    lambda_graph: float = 1.0
    lambda_dense: float = 0.0
    tol: float = 1e-6
    max_iter: int = 50
    query_chunk: int | None = None
    edge_weights: bool = False

    def validate(self) -> None:
        if self.num_seeds < 1:
            raise ValueError(f"num_seeds must be >= 1, got {self.num_seeds}")
        check_alpha(self.alpha)


@dataclass(frozen=True)
class HippoRAGKnobs(Knobs):
    """HippoRAG 2's global walk (:class:`~isorag_pyg.retrieval.HippoRAGRetriever`), with its
    published settings as defaults: damping 0.5, passage-node weight 0.05, query-matched entity
    seeds weighted by the inverse of the number of passages that mention them, the 5 heaviest kept.

    Args:
        alpha: the probability of following an edge (igraph's ``damping``).
        passage_node_weight: the teleport weight of every passage, times its min-max scaled
            cosine with the question (the entity seeds weigh 1 / their passages each).
        linking_top_k: the entity seeds kept per question, heaviest first.
        edge_weights: the walk follows the graph's edge weights (the mention weights of an
            entity graph) instead of every edge alike.
        tol, max_iter, query_chunk: as in :class:`PPRKnobs`.
    """

    alpha: float = 0.5
    passage_node_weight: float = 0.05
    linking_top_k: int = 5
    edge_weights: bool = False
    tol: float = 1e-6
    max_iter: int = 50
    query_chunk: int | None = None

    def validate(self) -> None:
        check_alpha(self.alpha)
        if not self.passage_node_weight >= 0:
            raise ValueError(f"passage_node_weight must be >= 0, got {self.passage_node_weight}")
        if self.linking_top_k < 1:
            raise ValueError(f"linking_top_k must be >= 1, got {self.linking_top_k}")


@dataclass(frozen=True)
class DenseKnobs(Knobs):
    """Flat dense retrieval's knobs: ``query_chunk`` as in :class:`ISOKnobs`."""

    query_chunk: int | None = None


@dataclass(frozen=True)
class BM25Knobs(Knobs):
    """BM25's knobs (bm25s): the stopword list and Okapi's ``k1`` and ``b``."""

    stopwords: str = "en"
    k1: float = 1.5
    b: float = 0.75
