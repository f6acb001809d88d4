"""The dense candidate step, exact or approximate: each query's top-``L`` pool with cosine
scores, and the cosine of any further (query, passage) pair the retrievers ask for.

Exact: one ``[Q, N]`` scan, as before. ANN: the pool comes from an :class:`ANNIndex` and every
score is the dot product of the query with just the passages asked for, so nothing ``N``-wide
is formed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.retrieval.scoring import query_chunk_size

#: (query, passage) pairs scored at once in ANN mode (a ``[PAIR_BLOCK, d]`` gather).
PAIR_BLOCK = 1 << 14


@dataclass
class DenseCandidates:
    """A chunk of queries' dense candidates.

    ``pool[q]`` are query ``q``'s top ``L`` passages, best first, ``pool_scores[q]`` their cosines;
    :meth:`score` gives the cosine of any pairs: read from ``full``, the exact ``[Q, N]`` score
    matrix, or (ANN mode) the dot products of ``queries`` with the ``embeddings`` asked for.
    """

    pool: Tensor  # [Q, L] corpus rows
    pool_scores: Tensor  # [Q, L]
    full: Tensor | None = None  # [Q, N]
    queries: Tensor | None = None  # [Q, d] unit-norm
    embeddings: Tensor | None = None  # [N, d] unit-norm

    @classmethod
    def from_scores(cls, scores: Tensor, pool_size: int, num_passages: int | None = None) -> DenseCandidates:
        """The exact candidates of a ``[Q, N]`` score matrix (among its first ``num_passages``
        columns: the passages; default: all)."""
        top = scores[:, :num_passages].topk(pool_size, dim=1)
        return cls(top.indices, top.values, full=scores)

    def score(self, query: Tensor, node: Tensor) -> Tensor:
        """Cosine of every pair (``query[i]``, ``node[i]``)."""
        if self.full is not None:
            return self.full[query, node]
        return pair_scores(self.queries, self.embeddings, query, node)


def pair_scores(queries: Tensor, embeddings: Tensor, query: Tensor, node: Tensor) -> Tensor:
    """``(queries[query] * embeddings[node]).sum(-1)``, in blocks of :data:`PAIR_BLOCK` pairs."""
    out = queries.new_empty(query.shape)
    flat_q, flat_n, flat_out = query.reshape(-1), node.reshape(-1), out.view(-1)
    for start in range(0, flat_q.numel(), PAIR_BLOCK):
        stop = start + PAIR_BLOCK
        flat_out[start:stop] = (queries[flat_q[start:stop]] * embeddings[flat_n[start:stop]]).sum(-1)
    return out


def check_ann_index(ann: ANNIndex | None, graph: RetrievalGraph) -> None:
    """``ValueError`` unless ``ann`` (when given) indexes exactly ``graph``'s passages."""
    if ann is not None and (ann.num_passages, ann.dim) != (graph.num_passages, graph.dim):
        raise ValueError(f"the ANN index holds {ann.num_passages} vectors of size {ann.dim}; "
                         f"the retrieval graph {graph.num_passages} passages of size {graph.dim}")


def candidate_chunk(graph: RetrievalGraph, ann: ANNIndex | None, requested: int | None = None) -> int:
    """Queries per chunk: an exact scan keeps its ``[chunk, N]`` block within the score budget,
    an ANN search holds no such block (then at most 1024, or ``requested``)."""
    return query_chunk_size(graph.num_nodes if ann is None else 1, requested)


def dense_candidates(graph: RetrievalGraph, query_embeddings: Tensor, pool_size: int, ann: ANNIndex | None = None) -> DenseCandidates:
    """Top-``pool_size`` candidates of every query: the exact scan (``ann=None``), or ``ann``'s
    pool re-scored exactly and sorted (a query for which ``ann`` finds fewer than ``pool_size``
    passages falls back to the exact scan)."""
    if ann is None:
        return DenseCandidates.from_scores(graph.scores(query_embeddings), pool_size, graph.num_passages)
    queries = graph.unit_queries(query_embeddings)
    pool = ann.search(queries, pool_size).to(graph.device)
    short = (pool < 0).any(dim=1).nonzero().squeeze(1)
    step = query_chunk_size(graph.num_nodes)  # the fallback's [rows, N] block stays within the score budget
    for start in range(0, short.numel(), step):
        rows = short[start : start + step]
        pool[rows] = (queries[rows] @ graph.embeddings[: graph.num_passages].t()).topk(pool_size, dim=1).indices
    rows = torch.arange(pool.size(0), device=pool.device).unsqueeze(1).expand_as(pool)
    scores = pair_scores(queries, graph.embeddings, rows, pool)
    scores, order = scores.sort(dim=1, descending=True, stable=True)
    return DenseCandidates(pool.gather(1, order), scores, queries=queries, embeddings=graph.embeddings)
