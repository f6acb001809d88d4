"""ISO-RAG retrieval: seeds -> local graph -> isoperimetric filter -> local PPR -> fusion."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.retrieval.candidates import (
    candidate_chunk,
    check_ann_index,
    dense_candidates,
)
from isorag_pyg.retrieval.graph_index import GraphIndex
from isorag_pyg.retrieval.local_graph import LocalGraphBatch, build_local_graphs, segment_ptr
from isorag_pyg.retrieval.scoring import segment_minmax, segment_topk
from isorag_pyg.retrieval.types import (
    Queries,
    RetrievalResult,
    check_k,
    retrieve_in_chunks,
)
from isorag_pyg.utils.isoperimetric import ablate_log_phi, isoperimetric_keep_mask
from isorag_pyg.utils.ppr import personalized_pagerank


def teleport_weights(seed_scores: Tensor, tau: float) -> Tensor:
    """``softmax(tau * s)`` over each query's seeds; uniform where that is not finite."""
    weights = torch.softmax(tau * seed_scores, dim=1)
    bad = ~torch.isfinite(weights).all(dim=1)
    weights[bad] = 1.0 / seed_scores.size(1)
    return weights


class ISORetriever:
    """ISO-RAG over a corpus graph.

    Per query: cosine seeds (top ``num_seeds``) and a dense pool of ``L = over_retrieval * k``
    (from the exact scan, or from ``ann``: then the dense scores used below are dot products
    with just the passages concerned);
    the local graph is the pool plus the ``hops``-hop neighbourhood of the seeds (at most
    ``max_expansion`` new nodes per hop, best dense score first); edges whose endpoints'
    isoperimetric profiles differ by more than ``beta`` are removed (the rule of
    :class:`~isorag_pyg.transforms.IsoperimetricFilter`, decided once per corpus edge since φ is
    precomputed per node); personalized PageRank runs on what is
    left with teleport ``softmax(tau * s_dense)`` over the seeds; the result is
    ``lambda_graph * minmax(pi) + lambda_dense * minmax(s_dense)`` over the candidates.

    All queries of a chunk run together: their local graphs form one block-diagonal batch, so
    every PPR iteration is a single sparse matmul (on ``device``, CPU or CUDA).

    The defaults are ``conf/retriever/iso.yaml``'s (chosen on the training questions across clean
    and noisy graphs by ``benchmarks/noise.py``; a test keeps the two equal).

    Args:
        index: the corpus graph and passage embeddings, prepared for retrieval.
        log_phi: ``[N]`` precomputed log isoperimetric profile of every passage
            (:func:`~isorag_pyg.utils.log_phi_from_ball`).
        phi_mode: ``"real"`` or an ablation (:func:`~isorag_pyg.utils.ablate_log_phi`):
            ``"uniform"``, ``"shuffled"``, ``"random"``, seeded by ``seed``.
        query_chunk: queries per batched call (default: as many as fit a 256 MiB score block,
            at most 1024).
        edge_weights: the local PPR follows edges in proportion to the index's edge weights
            (default: unweighted); the filter itself reads only φ.
        ann: an approximate nearest-neighbour index over ``index``'s embeddings for the pool and
            seeds (default: ``None``, the exact scan).
    """

    name = "iso"

    def __init__(
        self,
        index: GraphIndex,
        log_phi: Tensor,
        num_seeds: int = 5,
        over_retrieval: float = 5.0,
        hops: int = 1,
        max_expansion: int = 100,
        beta: float = 0.2,
        phi_mode: str = "real",
        alpha: float = 0.85,
        tau: float = 10.0,
        lambda_graph: float = 0.9,
        lambda_dense: float = 0.1,
        tol: float = 1e-6,
        max_iter: int = 50,
        seed: int = 0,
        query_chunk: int | None = None,
        edge_weights: bool = False,
        ann: ANNIndex | None = None,
    ):
        if num_seeds < 1 or hops < 0 or max_expansion < 0:
            raise ValueError("num_seeds must be >= 1, hops and max_expansion >= 0")
        if over_retrieval < 1:
            raise ValueError(f"over_retrieval must be >= 1, got {over_retrieval}")
        if lambda_graph < 0 or lambda_dense < 0 or lambda_graph + lambda_dense == 0:
            raise ValueError("lambda_graph and lambda_dense must be >= 0 and not both 0")
        self.index = index
        if log_phi.numel() != index.num_nodes:
            raise ValueError(f"log_phi has {log_phi.numel()} values for {index.num_nodes} passages")
        self.log_phi = ablate_log_phi(log_phi.to(index.device), phi_mode, seed)
        self.up_edge_weight = index.require_edge_weight()[index.up_edge_id] if edge_weights else None
        # φ is per node, so whether an edge survives the filter does not depend on the query:
        # decide it once for every corpus edge, then look it up for each local subgraph
        self.edge_keep = isoperimetric_keep_mask(self.index.up_edge_index, self.log_phi, beta)
        self.num_seeds, self.over_retrieval, self.hops, self.max_expansion = num_seeds, over_retrieval, hops, max_expansion
        self.beta, self.phi_mode, self.alpha, self.tau = beta, phi_mode, alpha, tau
        self.lambda_graph, self.lambda_dense, self.tol, self.max_iter = lambda_graph, lambda_dense, tol, max_iter
        self.query_chunk = query_chunk
        check_ann_index(ann, index)
        self.ann = ann

    def sizes(self, k: int) -> tuple[int, int, int]:
        """(k, pool size L, seeds m), clipped to the corpus."""
        n = self.index.num_passages
        k = check_k(k, n)
        pool = min(n, max(k, math.ceil(self.over_retrieval * k)))
        return k, pool, min(self.num_seeds, pool)

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        chunk = candidate_chunk(self.index, self.ann, self.query_chunk)
        return retrieve_in_chunks(queries, chunk, lambda part: self._retrieve_chunk(part, k, trace))

    def _retrieve_chunk(self, queries: Queries, k: int, trace: bool) -> RetrievalResult:
        k, pool, m = self.sizes(k)
        candidates = dense_candidates(self.index, queries.embeddings, pool, self.ann)
        local = build_local_graphs(candidates, self.index, m, self.hops, self.max_expansion)
        num_queries, num_local = len(queries), local.node.numel()
        keep = self.edge_keep[local.edge_slot]
        teleport = torch.zeros(num_local, device=local.node.device)
        teleport[local.seed_pos.reshape(-1)] = teleport_weights(candidates.pool_scores[:, :m], self.tau).reshape(-1)
        weight = None if self.up_edge_weight is None else self.up_edge_weight[local.edge_slot[keep]]
        ppr = personalized_pagerank(local.edge_index[:, keep], teleport, self.alpha, local.batch, num_queries, self.tol, self.max_iter, weight)
        pi = ppr.pi.squeeze(1)
        # passages only are ranked (an entity graph's entity nodes carry PPR mass, not answers)
        ranked = (local.node < self.index.num_passages).nonzero().squeeze(1)
        batch = local.batch[ranked]
        ptr = segment_ptr(batch, num_queries)
        dense = candidates.score(batch, local.node[ranked])
        scaled = segment_minmax(torch.stack([pi[ranked], dense], 1), batch, ptr)
        fused = self.lambda_graph * scaled[:, 0] + self.lambda_dense * scaled[:, 1]
        positions, top_scores = segment_topk(fused, batch, ptr, k)
        positions = torch.where(positions >= 0, ranked[positions.clamp_min(0)], positions)
        stats = {
            "queries": float(num_queries),
            "candidates": float(num_local),
            "local_edges": float(local.edge_index.size(1)),
            "removed_edges": float(keep.numel() - int(keep.sum())),
            "ppr_iterations_max": float(ppr.iterations),
        }
        traces = self._traces(local, keep, pi, positions, top_scores) if trace else None
        return RetrievalResult(local.node[positions].cpu(), top_scores.cpu(), stats, traces)

    def _traces(self, local: LocalGraphBatch, keep: Tensor, pi: Tensor, positions: Tensor, scores: Tensor) -> list[dict[str, Any]]:
        node = local.node.tolist()
        src, dst = local.edge_index
        once = src < dst  # each undirected edge once
        traces = []
        for q in range(local.ptr.numel() - 1):
            lo, hi = int(local.ptr[q]), int(local.ptr[q + 1])
            in_q = once & (src >= lo) & (src < hi)
            edges = {flag: [(node[u], node[v]) for u, v in local.edge_index[:, in_q & (keep == flag)].t().tolist()] for flag in (True, False)}
            traces.append({
                "seeds": local.seeds[q].tolist(),
                "candidates": node[lo:hi],
                "kept_edges": edges[True],
                "pruned_edges": edges[False],
                "ppr": {node[i]: float(pi[i]) for i in range(lo, hi)},
                "top": list(zip(local.node[positions[q]].tolist(), scores[q].tolist())),
            })
        return traces
