"""Incremental index updates: add and remove passages without rebuilding.

The result equals a full rebuild over the same passages with the same f_θ (tested): the text
builders (title mentions both ways, ...) run again over the corpus, which is one linear pass;
k-NN lists are recomputed only for rows whose neighbours can change; new passages get ball
coordinates from the stored f_θ; and φ is recomputed only for the nodes whose closed
neighbourhood or 2-hop shell can have changed — the endpoints of added or removed edges, the new
nodes, and their neighbours. An ANN index takes the new vectors (FAISS ``add``); after a removal
it is built again over the remaining passages with the same parameters (FAISS's HNSW cannot
delete, and IVF would keep the old row numbers).

Everything here is a function of an index's parts returning new ones (:func:`added`,
:func:`removed`): the index swaps them in; nothing here knows the index class.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from isorag_pyg.datasets.types import MatchReport, Passage
from isorag_pyg.graph import GraphEdges, build_corpus_graph, graph_statistics, run_builders
from isorag_pyg.graph.builders import knn
from isorag_pyg.graph.corpus_graph import named_edge_difference
from isorag_pyg.index.corpus import as_passages, corpus_hash, near_duplicates
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.store.contents import IndexContents
from isorag_pyg.store.passages import PassageStore, rows_of
from isorag_pyg.utils.bridging import bridging_from_ball
from isorag_pyg.utils.isoperimetric import log_phi_from_ball

log = logging.getLogger(__name__)

#: Graph builders an update cannot follow: the questions' ones (an index does not keep the
#: questions) and seeded noise (a benchmark device drawn over the whole corpus at once).
NOT_UPDATABLE = ("context_cooccurrence", "train_cooccurrence", "noise")


@dataclass
class UpdateReport:
    """What an update changed."""

    added: int = 0
    removed: int = 0
    duplicates_skipped: int = 0
    duplicate_ids: list[tuple[str, str]] = field(default_factory=list)  # (kept id, dropped id): same text, another id
    near_duplicates: int = 0  # added passages whose text repeats another's but for its numbers (kept: each is a passage of its own)
    edges_added: int = 0
    edges_removed: int = 0
    phi_recomputed: int = 0  # graph nodes whose φ was recomputed (an entity graph's entity nodes included)
    ann: str = "none"  # none (exact scan) | extended | rebuilt

    def summary(self) -> str:
        ann = "" if self.ann == "none" else f"; ANN index {self.ann}"
        shown = ", ".join(f"{kept!r} kept, {dropped!r} dropped" for kept, dropped in self.duplicate_ids[:10])
        same = f" (same text under two ids: {shown}{', ...' if len(self.duplicate_ids) > 10 else ''})" if shown else ""
        near = f" ({self.near_duplicates} of them near-duplicates: the same text as another but for its numbers, kept)" if self.near_duplicates else ""
        return (f"{self.added} passages added{near}, {self.removed} removed, {self.duplicates_skipped} duplicates skipped{same}; "
                f"{self.edges_added} edges added, {self.edges_removed} removed; φ recomputed for {self.phi_recomputed} graph nodes{ann}")


@dataclass(frozen=True)
class Updatable:
    """The parts of an index an update reads: its contents, graph builders, φ recipe, f_θ, ANN and
    the number the next passage without an id gets (:mod:`~isorag_pyg.store.ids`)."""

    contents: IndexContents
    graph_spec: Mapping[str, Mapping[str, Any]]
    phi: PhiSpec
    f_theta: PoincareEncoder | None
    ann: ANNIndex | None
    next_id: int


def check_updatable(graph_spec: Mapping[str, Any]) -> None:
    if used := [name for name in graph_spec if name in NOT_UPDATABLE]:
        raise ValueError(f"this index's graph uses {', '.join(used)}, which an update cannot follow (built from questions the index "
                         "does not keep, or seeded noise over the whole corpus): rebuild it instead")


def added(index: Updatable, passages: Sequence[Passage | Mapping[str, Any]],
          encode: Callable[[list[str]], Tensor]) -> tuple[IndexContents, ANNIndex | None, UpdateReport]:
    """The contents and ANN index after appending ``passages`` (their texts embedded by
    ``encode``, called only when there is something new). Passages without ids are numbered
    from ``index.next_id`` (a counter that never repeats an id); a conflicting id is an error; a
    passage identical to one in the index is skipped and counted, with its id and the kept one
    in ``report.duplicate_ids``; one that differs from another only in its numbers is added,
    counted in ``report.near_duplicates`` and logged in a warning (:func:`~isorag_pyg.index.corpus.near_duplicates`)."""
    check_updatable(index.graph_spec)
    existing = index.contents.passages
    merged = MatchReport()
    corpus = as_passages(passages, id_offset=index.next_id, report=merged)
    known = {(p.title, p.text): p.id for p in existing}
    fresh = [p for p in corpus if (p.title, p.text) not in known]
    for p in fresh:
        if existing.row_of(p.id) is not None:
            raise ValueError(f"passage id {p.id!r} is already in the index (give new passages ids of their own)")
    assigned = {p.id for p in corpus if p.id.isdigit() and int(p.id) >= index.next_id}  # numbered here, not given
    report = UpdateReport(added=len(fresh), duplicates_skipped=len(corpus) - len(fresh) + merged.duplicate_passages)
    report.duplicate_ids = merged.duplicate_ids + [(known[(p.title, p.text)], p.id) for p in corpus if (p.title, p.text) in known
                                                   and known[(p.title, p.text)] != p.id and p.id not in assigned]
    if not fresh:
        return index.contents, index.ann, report
    report.near_duplicates, example = near_duplicates(fresh, existing)
    if example is not None:
        log.warning("add: %d of the %d new passages repeat another passage's text but for its numbers (all kept), e.g. %r: %.80s",
                    report.near_duplicates, len(fresh), example.id, example.text)
    x = torch.cat([index.contents.embeddings.float(), encode([p.content for p in fresh])])
    contents, ann = _apply(index, list(existing) + fresh, x, torch.arange(len(existing)), report)
    return contents, ann, report


def removed(index: Updatable, ids: Iterable[str]) -> tuple[IndexContents, ANNIndex | None, UpdateReport]:
    """The contents and ANN index after removing the passages with these ids (an unknown id is an error)."""
    check_updatable(index.graph_spec)
    passages = index.contents.passages
    rows = rows_of(passages, ids)
    n = len(passages)
    if rows.numel() == n:
        raise ValueError("cannot remove every passage of an index")
    keep = torch.ones(n, dtype=torch.bool)
    keep[rows] = False
    old_to_new = torch.full((n,), -1, dtype=torch.long)
    old_to_new[keep] = torch.arange(int(keep.sum()))
    report = UpdateReport(removed=rows.numel())
    corpus = [p for p, k in zip(passages, keep.tolist()) if k]
    contents, ann = _apply(index, corpus, index.contents.embeddings[keep].float(), old_to_new, report)
    return contents, ann, report


def _apply(index: Updatable, corpus: list[Passage], x: Tensor, old_to_new: Tensor, report: UpdateReport) -> tuple[IndexContents, ANNIndex | None]:
    """Contents holding ``corpus`` (kept passages in their old order, then the new ones) with
    embeddings ``x``; ``old_to_new`` maps every old row to its new row or -1 (removed)."""
    old = index.contents
    n = len(corpus)
    kept_old = old_to_new >= 0
    added_rows = torch.arange(int(kept_old.sum()), n)
    edges = run_builders({k: v for k, v in index.graph_spec.items() if k != "knn"}, corpus, x)
    knn_edges = None
    if "knn" in index.graph_spec:
        knn_edges = updated_knn(old.knn_edges, old_to_new, x, added_rows, index.graph_spec["knn"])
        edges["knn"] = knn_edges
    # the builders' order, as in a rebuild
    edges = GraphEdges({name: edges[name] for name in index.graph_spec}, records=edges.records, entity_names=edges.entity_names,
                       unique_mentions=edges.unique_mentions)
    data = build_corpus_graph(corpus, x, edges)
    if data.num_nodes > n or old.graph.num_nodes > len(old.passages):  # entity nodes: renumbered, so φ everywhere
        report.edges_added, report.edges_removed = named_edge_difference(old.graph, data, old.passages.ids, [p.id for p in corpus])
        z = None if old.z is None else index.f_theta.embed_all(data.x.float())
        log_phi = log_phi_from_ball(data.edge_index, z, index.phi, num_nodes=data.num_nodes)
        report.phi_recomputed = data.num_nodes
        ann = updated_ann(index.ann, x, added_rows, bool(kept_old.all()), report)
        statistics = {**graph_statistics(data), "builders": list(data.builders)}
        bridging = bridging_from_ball(data.edge_index, z, index.phi, num_nodes=data.num_nodes)
        return IndexContents(PassageStore(corpus), x, data, log_phi, bridging, statistics, corpus_hash(corpus), z, knn_edges), ann

    ends = old_to_new[old.graph.edge_index]
    old_edges = ends[:, (ends >= 0).all(0)]
    gained, lost = edge_difference(old_edges, data.edge_index, n)
    report.edges_added = gained.size(1) // 2
    report.edges_removed = lost.size(1) // 2 + int((ends < 0).any(0).sum()) // 2
    changed = torch.zeros(n, dtype=torch.bool)
    changed[added_rows] = True
    changed[torch.cat([gained.reshape(-1), lost.reshape(-1)])] = True
    changed[ends[1][(ends[0] < 0) & (ends[1] >= 0)]] = True  # kept neighbours of removed passages
    affected = changed.clone()  # φ_u reads u's edges and its neighbours' edges: the changed nodes and their neighbours
    affected[data.edge_index[1][changed[data.edge_index[0]]]] = True
    nodes = affected.nonzero().squeeze(1)

    z = None
    if old.z is not None:
        z = torch.cat([old.z[kept_old], index.f_theta.embed_all(x[added_rows].float())])
    log_phi = torch.empty(n, dtype=torch.float64)
    log_phi[old_to_new[kept_old]] = old.log_phi[kept_old].double()
    if nodes.numel():
        log_phi[nodes] = log_phi_from_ball(data.edge_index, z, index.phi, num_nodes=n, nodes=nodes)
    report.phi_recomputed = int(nodes.numel())
    ann = updated_ann(index.ann, x, added_rows, bool(kept_old.all()), report)
    statistics = {**graph_statistics(data), "builders": list(data.builders)}
    bridging = bridging_from_ball(data.edge_index, z, index.phi, num_nodes=n)  # every node: a passage's score reads 2 hops around it
    return IndexContents(PassageStore(corpus), x, data, log_phi, bridging, statistics, corpus_hash(corpus), z, knn_edges), ann


def updated_ann(ann: ANNIndex | None, x: Tensor, added_rows: Tensor, appended_only: bool, report: UpdateReport) -> ANNIndex | None:
    """The ANN index over the updated (unit-norm) embeddings ``x``: a copy of the old one with the
    new rows added when nothing was removed, else a new one built with the same parameters."""
    if ann is None:
        return None
    if appended_only:
        report.ann = "extended"
        return ann.extended(x[added_rows])
    report.ann = "rebuilt"
    return ann.rebuilt(x)


def updated_knn(old: Tensor, old_to_new: Tensor, x: Tensor, added_rows: Tensor, params: Mapping[str, Any]) -> Tensor:
    """The k-NN lists after an update: recomputed for new rows, for rows that lost a neighbour,
    and for old rows that a new passage may enter (closer than their k-th neighbour)."""
    k = int(params.get("k", 5))
    src, dst = old_to_new[old[0]], old_to_new[old[1]]
    alive = src >= 0
    stale = torch.zeros(x.size(0), dtype=torch.bool)
    stale[src[alive & (dst < 0)]] = True  # lost a neighbour
    src, dst = src[alive & (dst >= 0)], dst[alive & (dst >= 0)]
    unit = torch.nn.functional.normalize(x.float(), dim=-1)
    if added_rows.numel() and src.numel():
        kth = torch.full((x.size(0),), float("inf"))
        kth.scatter_reduce_(0, src, (unit[src] * unit[dst]).sum(-1), reduce="amin")
        for start in range(0, x.size(0), 4096):  # old rows a new passage comes closer to than their k-th neighbour
            rows = torch.arange(start, min(start + 4096, x.size(0)))
            best = (unit[rows] @ unit[added_rows].t()).max(dim=1).values
            stale[rows[best >= kth[rows]]] = True
    stale[added_rows] = True
    counts = torch.bincount(src, minlength=x.size(0))
    stale |= counts < min(k, x.size(0) - 1)  # rows whose list was short (a small corpus that grew)
    keep = ~stale[src]
    fresh = knn(x, rows=stale.nonzero().squeeze(1), **params)
    edges = torch.cat([torch.stack([src[keep], dst[keep]]), fresh], 1)
    return edges[:, torch.argsort(edges[0], stable=True)]


def edge_difference(old: Tensor, new: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """Directed edges in ``new`` but not ``old``, and in ``old`` but not ``new``."""
    old_keys, new_keys = torch.unique(old[0] * n + old[1]), torch.unique(new[0] * n + new[1])
    gained = new_keys[~_member(new_keys, old_keys)]
    lost = old_keys[~_member(old_keys, new_keys)]
    return torch.stack([gained // n, gained % n]), torch.stack([lost // n, lost % n])


def _member(keys: Tensor, sorted_keys: Tensor) -> Tensor:
    """``keys`` found in ``sorted_keys`` (binary search)."""
    if sorted_keys.numel() == 0:
        return torch.zeros_like(keys, dtype=torch.bool)
    slot = torch.searchsorted(sorted_keys, keys).clamp_max(sorted_keys.numel() - 1)
    return sorted_keys[slot] == keys
