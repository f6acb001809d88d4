"""The retrievers an index serves, by name: each name's knob dataclass and constructor.

``iso`` is ISO-RAG; ``iso_uniform``, ``iso_shuffled`` and ``iso_random`` are its φ ablations
(ISO-RAG's knobs with ``phi_mode`` fixed; they share ISO-RAG's stored knobs unless they have
their own); ``dense``, ``bm25``, ``ppr`` (global PPR from the dense seeds) and ``hipporag``
(HippoRAG 2's walk from the entities a question names) are the baselines.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph.query_entities import QueryEntityMatcher, query_extractor
from isorag_pyg.knobs import PHI_OVERRIDES, BM25Knobs, DenseKnobs, HippoRAGKnobs, ISOKnobs, Knobs, PhiSpec, PPRKnobs
from isorag_pyg.plugins import Registry
from isorag_pyg.retrieval import (
    ANNIndex,
    BM25Retriever,
    DenseRetriever,
    GlobalPPRRetriever,
    HippoRAGRetriever,
    ISORetriever,
    RetrievalGraph,
    Retriever,
)


class RetrieverSource(Protocol):
    """What the constructors read from an index."""

    passages: Sequence[Passage]
    phi: PhiSpec
    log_phi: Tensor
    bridging: Tensor
    quarantine_mask: Tensor  # [N] bool: passages a user quarantined
    ann: ANNIndex | None
    graph: Any  # the corpus graph (PyG ``Data``), for retrievers that need more of it than the ones here read
    graph_spec: dict[str, Any]  # the builders and their arguments
    entity_names: list[str]  # an entity graph's entity nodes (rows after the passages)
    unique_mentions: dict[str, int]  # its entities that only one passage mentions -> that passage's row

    def retrieval_graph(self, device: str | torch.device = "auto") -> RetrievalGraph: ...

    def log_phi_for(self, spec: PhiSpec) -> Tensor: ...

    def retriever(self, name: str, device: str | torch.device = "auto", **knobs: Any) -> Retriever: ...


Make = Callable[[RetrieverSource, Any, Mapping[str, float], "str | torch.device"], Retriever]


def _entity_matcher(source: RetrieverSource, unique_mentions: bool = True, with_titles: bool = False) -> QueryEntityMatcher | None:
    """The matcher of the entity nodes (and, with ``unique_mentions``, the passages that alone
    mention an entity; ``with_titles``, their titles) a question names; ``None`` on a graph
    without entity nodes."""
    names = source.entity_names
    if not names:
        return None
    unique = source.unique_mentions if unique_mentions else {}
    title_of = (lambda row: source.passages[row].title) if with_titles else None
    return QueryEntityMatcher(names, len(source.passages), query_extractor(source.graph_spec), unique, title_of)


def _iso(source: RetrieverSource, knobs: ISOKnobs, phi_changes: Mapping[str, float], device: str | torch.device) -> Retriever:
    log_phi = source.log_phi_for(source.phi.replace(**phi_changes)) if phi_changes else source.log_phi
    matcher = _entity_matcher(source, knobs.unique_mention_seeds, knobs.unique_mentions_vouched or knobs.vouch_share > 0) if knobs.entity_seeds > 0 else None
    lexical = source.retriever("bm25") if knobs.lexical_weight > 0 else None  # built once per index (cached)
    return ISORetriever(source.retrieval_graph(device), log_phi, knobs, ann=source.ann, entity_matcher=matcher, bridging=source.bridging,
                        quarantined=source.quarantine_mask, lexical=lexical)


def _hipporag(source: RetrieverSource, knobs: HippoRAGKnobs, _: Mapping[str, float], device: str | torch.device) -> Retriever:
    return HippoRAGRetriever(source.retrieval_graph(device), knobs, entity_matcher=_entity_matcher(source))


def _dense(source: RetrieverSource, knobs: DenseKnobs, _: Mapping[str, float], device: str | torch.device) -> Retriever:
    return DenseRetriever(source.retrieval_graph(device), knobs, ann=source.ann)


def _ppr(source: RetrieverSource, knobs: PPRKnobs, _: Mapping[str, float], device: str | torch.device) -> Retriever:
    return GlobalPPRRetriever(source.retrieval_graph(device), knobs)


def _bm25(source: RetrieverSource, knobs: BM25Knobs, _: Mapping[str, float], device: str | torch.device) -> Retriever:
    return BM25Retriever([p.content for p in source.passages], knobs)


@dataclass(frozen=True)
class RetrieverKind:
    """A retriever name's knobs and constructor.

    Attributes:
        knobs: the knob dataclass.
        make: ``make(source, knobs, phi_changes, device)``.
        fixed: knobs this name fixes (an ablation's ``phi_mode``).
        shares: the name whose stored knobs apply when this one has none stored.
        phi_overrides: φ fields (:class:`~isorag_pyg.knobs.PhiSpec`) it may override for itself.
        cached: built once per knobs (indexing the corpus costs; no device).
    """

    knobs: type[Knobs]
    make: Make
    fixed: dict[str, Any] = field(default_factory=dict)
    shares: str | None = None
    phi_overrides: tuple[str, ...] = ()
    cached: bool = False


def _ablation(mode: str) -> RetrieverKind:
    return RetrieverKind(ISOKnobs, _iso, fixed={"phi_mode": mode}, shares="iso", phi_overrides=PHI_OVERRIDES)


#: Retriever name -> its kind: ISO-RAG, its φ ablations and the baselines; plugins add theirs
#: through the ``isorag_pyg.retrievers`` entry-point group (a :class:`RetrieverKind` each).
REGISTRY: Registry[RetrieverKind] = Registry({
    "iso": RetrieverKind(ISOKnobs, _iso, phi_overrides=PHI_OVERRIDES),
    **{f"iso_{mode}": _ablation(mode) for mode in ("uniform", "shuffled", "random")},
    "dense": RetrieverKind(DenseKnobs, _dense),
    "bm25": RetrieverKind(BM25Knobs, _bm25, cached=True),
    "ppr": RetrieverKind(PPRKnobs, _ppr),
    "hipporag": RetrieverKind(HippoRAGKnobs, _hipporag),
}, group="isorag_pyg.retrievers", kind="retriever")
#: The retriever names an index serves (a read-only mapping to their kinds: ``name in RETRIEVERS``, ``list(RETRIEVERS)``).
RETRIEVERS = REGISTRY


def check_retriever_name(name: str) -> None:
    """``ValueError`` unless ``name`` is one of :data:`RETRIEVERS`."""
    REGISTRY[name]  # raises naming the known ones


def resolve_knobs(name: str, stored: Mapping[str, Mapping[str, Any]], given: Mapping[str, Any]) -> tuple[Knobs, dict[str, float]]:
    """``name``'s typed knobs (given over stored over the dataclass defaults) and its φ changes;
    ``ValueError`` naming any unknown knob."""
    check_retriever_name(name)
    kind = REGISTRY[name]
    own = stored.get(name, stored.get(kind.shares, {}) if kind.shares else {})
    values = {**own, **given, **kind.fixed}
    phi_changes = {key: float(values.pop(key)) for key in kind.phi_overrides if key in values}
    allowed = [f.name for f in dataclasses.fields(kind.knobs)]
    if unknown := sorted(set(values) - set(allowed)):
        raise ValueError(f"unknown knob(s) {', '.join(unknown)} for retriever {name!r}; it takes {', '.join(allowed + list(kind.phi_overrides))}")
    return kind.knobs(**values), phi_changes


def make_retriever(source: RetrieverSource, name: str, stored: Mapping[str, Mapping[str, Any]], given: Mapping[str, Any],
                   device: str | torch.device, cache: dict[tuple[str, Knobs], Retriever]) -> Retriever:
    """The retriever ``name`` over ``source`` with :func:`resolve_knobs`'s knobs; kinds marked
    ``cached`` are kept in ``cache``.

    Knobs are the fields of the retriever's dataclass in :mod:`isorag_pyg.knobs`; those not
    given come from the knobs stored in the index, then the dataclass defaults. ISO-RAG also
    takes ``p``, ``eps`` and ``shell_floor``, which override the index's φ recipe for this
    retriever. ISO-RAG, its ablations and dense take their candidates from the index's ANN index."""
    knobs, phi_changes = resolve_knobs(name, stored, given)
    kind = REGISTRY[name]
    if kind.cached and (name, knobs) in cache:
        return cache[name, knobs]
    retriever = kind.make(source, knobs, phi_changes, device)
    retriever.name = name
    if kind.cached:
        cache[name, knobs] = retriever
    return retriever
