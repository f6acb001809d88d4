"""Per-query local candidate graphs, built for a whole chunk of queries at once as one
block-diagonal batch (node ``i`` belongs to query ``batch[i]``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from isorag_pyg.retrieval.candidates import DenseCandidates
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.retrieval.scoring import segment_ptr
from isorag_pyg.utils.csr import expand_neighbors, neighbor_edges


@dataclass
class LocalGraphBatch:
    node: Tensor  # [M] corpus row of every local node, grouped by query, ascending within a query
    batch: Tensor  # [M] query of every local node
    ptr: Tensor  # [Q + 1] node offsets per query
    edge_index: Tensor  # [2, E] local node positions, block-diagonal
    edge_slot: Tensor  # [E] the corpus edge of every local edge: a column of ``RetrievalGraph.up_edge_index``
    seed_pos: Tensor  # [Q, m] local positions of each query's seeds
    seeds: Tensor  # [Q, m] corpus rows of the seeds, best first
    entity_pos: Tensor  # [S] local positions of the query-matched entity seeds (empty: none)

    def traces(self, keep: Tensor, pi: Tensor, positions: Tensor, scores: Tensor) -> list[dict[str, Any]]:
        """Per query, its local graph as ``explain`` shows it: seeds, entity seeds, candidates,
        kept and pruned edges (``keep`` over the local edges), PPR mass ``pi`` and the ranking
        (local ``positions``, ``scores``)."""
        node = self.node.tolist()
        src, dst = self.edge_index
        once = src < dst  # each undirected edge once
        traces = []
        for q in range(self.ptr.numel() - 1):
            lo, hi = int(self.ptr[q]), int(self.ptr[q + 1])
            in_q = once & (src >= lo) & (src < hi)
            edges = {flag: [(node[u], node[v]) for u, v in self.edge_index[:, in_q & (keep == flag)].t().tolist()] for flag in (True, False)}
            traces.append({
                "seeds": self.seeds[q].tolist(),
                "entity_seeds": self.node[self.entity_pos[self.batch[self.entity_pos] == q]].tolist(),
                "candidates": node[lo:hi],
                "kept_edges": edges[True],
                "pruned_edges": edges[False],
                "ppr": {node[i]: float(pi[i]) for i in range(lo, hi)},
                "top": list(zip(self.node[positions[q]].tolist(), scores[q].tolist())),
            })
        return traces


def cap_per_query(query: Tensor, score: Tensor, cap: int, num_queries: int) -> Tensor:
    """Positions of the ``cap`` best-scored entries of every query (stable on ties)."""
    order = torch.argsort(score, descending=True, stable=True)
    order = order[torch.argsort(query[order], stable=True)]
    grouped = query[order]
    first = segment_ptr(grouped, num_queries)[:-1]
    rank = torch.arange(order.numel(), device=order.device) - first[grouped]
    return order[rank < cap]


def build_local_graphs(
    candidates: DenseCandidates,
    graph: RetrievalGraph,
    num_seeds: int,
    hops: int = 1,
    max_expansion: int = 100,
    entity_seeds: tuple[Tensor, Tensor] | None = None,
) -> LocalGraphBatch:
    """V_loc(q) = the dense pool of ``candidates`` ∪ ``hops``-hop neighbourhood of its first
    ``num_seeds`` (the seeds) and of its query-matched entity seeds ``entity_seeds`` (query,
    graph row; default none), and the subgraph it induces.

    Hub explosion cap: at every hop at most ``max_expansion`` new neighbours per query are kept,
    those with the highest dense score, so a seed next to a hub adds a bounded number of nodes.
    """
    pool, n = candidates.pool, graph.num_nodes
    num_queries = pool.size(0)
    seeds = pool[:, :num_seeds]
    qids = torch.arange(num_queries, device=pool.device)
    empty = pool.new_empty(0)
    entity_q, entity_node = (empty, empty) if entity_seeds is None else (t.to(pool.device) for t in entity_seeds)
    keys = [(qids.unsqueeze(1) * n + pool).reshape(-1), entity_q * n + entity_node]
    frontier_q = torch.cat([qids.repeat_interleave(num_seeds), entity_q])
    frontier_node = torch.cat([seeds.reshape(-1), entity_node])
    for _ in range(hops):
        position, neighbour = expand_neighbors(graph.rowptr, graph.col, frontier_node)
        hop_keys = torch.unique(frontier_q[position] * n + neighbour)
        frontier_q, frontier_node = hop_keys // n, hop_keys % n
        if hop_keys.numel() > max_expansion:  # otherwise no query can be over the cap
            kept = cap_per_query(frontier_q, candidates.score(frontier_q, frontier_node), max_expansion, num_queries)
            frontier_q, frontier_node = frontier_q[kept], frontier_node[kept]
        keys.append(frontier_q * n + frontier_node)
    keys = torch.unique(torch.cat(keys))
    batch, node = keys // n, keys % n
    # each undirected edge once, from its lower-degree end; then both directions
    position, slot = neighbor_edges(graph.up_rowptr, node)
    target_keys = batch[position] * n + graph.up_col[slot]
    target = torch.searchsorted(keys, target_keys).clamp_max(keys.numel() - 1)
    inside = keys[target] == target_keys
    src, dst, slot = position[inside], target[inside], slot[inside]
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    seed_pos = torch.searchsorted(keys, qids.unsqueeze(1) * n + seeds)
    entity_pos = torch.searchsorted(keys, entity_q * n + entity_node)
    return LocalGraphBatch(node, batch, segment_ptr(batch, num_queries), edge_index, torch.cat([slot, slot]), seed_pos, seeds, entity_pos)
