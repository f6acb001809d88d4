"""Baselines behind the same interface: flat dense, BM25 and global (HippoRAG-style) PPR."""
from __future__ import annotations

import bm25s
import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from isorag_pyg.retrieval.graph_index import GraphIndex
from isorag_pyg.retrieval.iso_retriever import teleport_weights
from isorag_pyg.retrieval.scoring import query_chunk_size
from isorag_pyg.retrieval.types import Queries, RetrievalResult
from isorag_pyg.utils.ppr import personalized_pagerank


def _minmax_rows(values: Tensor) -> Tensor:
    lo, hi = values.min(dim=1, keepdim=True).values, values.max(dim=1, keepdim=True).values
    span = hi - lo
    return torch.where(span > 0, (values - lo) / span.clamp_min(1e-30), torch.zeros_like(values))


def _check_k(k: int, n: int) -> int:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return min(k, n)


class DenseRetriever:
    """Flat cosine top-k over the whole corpus, in query chunks."""

    name = "dense"

    def __init__(self, embeddings: Tensor, device: str | torch.device = "cpu", query_chunk: int | None = None):
        self.index = GraphIndex(torch.empty(2, 0, dtype=torch.long), embeddings, device)
        self.query_chunk = query_chunk

    @torch.no_grad()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = _check_k(k, self.index.num_nodes)
        chunk = query_chunk_size(self.index.num_nodes, self.query_chunk)
        parts = []
        for i in range(0, len(queries), chunk):
            top = self.index.scores(queries.embeddings[i : i + chunk]).topk(k, dim=1)
            traces = [{"top": list(zip(ix, sc))} for ix, sc in zip(top.indices.tolist(), top.values.tolist())] if trace else None
            parts.append(RetrievalResult(top.indices.cpu(), top.values.cpu(), {"queries": float(top.indices.size(0))}, traces))
        return RetrievalResult.concat(parts)


class BM25Retriever:
    """Okapi BM25 (bm25s) over the passage texts (title and text)."""

    name = "bm25"

    def __init__(self, texts: list[str], stopwords: str = "en", k1: float = 1.5, b: float = 0.75):
        if not texts:
            raise ValueError("BM25 needs a non-empty corpus")
        self.num_docs = len(texts)
        self.stopwords = stopwords
        self.model = bm25s.BM25(k1=k1, b=b)
        self.model.index(bm25s.tokenize(texts, stopwords=stopwords, show_progress=False), show_progress=False)

    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = _check_k(k, self.num_docs)
        tokens = bm25s.tokenize(queries.texts, stopwords=self.stopwords, show_progress=False)
        docs, scores = self.model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        indices = torch.as_tensor(np.asarray(docs, dtype=np.int64))
        values = torch.as_tensor(np.asarray(scores, dtype=np.float32))
        traces = [{"top": list(zip(ix, sc))} for ix, sc in zip(indices.tolist(), values.tolist())] if trace else None
        return RetrievalResult(indices, values, {"queries": float(len(queries))}, traces)


class GlobalPPRRetriever:
    """Personalized PageRank on the whole, unfiltered corpus graph (as HippoRAG-style systems do).

    Seeds and teleport are those of :class:`~isorag_pyg.retrieval.ISORetriever` (top
    ``num_seeds`` by cosine, ``softmax(tau * s)``); passages are ranked by
    ``lambda_graph * minmax(pi) + lambda_dense * minmax(s_dense)`` (default: PPR alone, ties
    broken by dense score). The queries of a chunk are the columns of one ``[N, chunk]`` iterate.
    """

    name = "ppr"

    def __init__(
        self,
        graph: Data,
        embeddings: Tensor,
        num_seeds: int = 5,
        alpha: float = 0.5,
        tau: float = 10.0,
        lambda_graph: float = 1.0,
        lambda_dense: float = 0.0,
        tol: float = 1e-6,
        max_iter: int = 50,
        device: str | torch.device = "cpu",
        query_chunk: int | None = None,
    ):
        self.index = GraphIndex(graph.edge_index, embeddings, device)
        self.num_seeds, self.alpha, self.tau = num_seeds, alpha, tau
        self.lambda_graph, self.lambda_dense, self.tol, self.max_iter = lambda_graph, lambda_dense, tol, max_iter
        self.query_chunk = query_chunk

    @torch.no_grad()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        n = self.index.num_nodes
        k = _check_k(k, n)
        chunk = query_chunk_size(n, self.query_chunk)
        parts = []
        for i in range(0, len(queries), chunk):
            scores = self.index.scores(queries.embeddings[i : i + chunk])
            seeds = scores.topk(min(self.num_seeds, n), dim=1)
            teleport = torch.zeros(n, scores.size(0), device=scores.device)
            columns = torch.arange(scores.size(0), device=scores.device).unsqueeze(1).expand_as(seeds.indices)
            teleport[seeds.indices, columns] = teleport_weights(seeds.values, self.tau)
            ppr = personalized_pagerank(self.index.edge_index, teleport, self.alpha, tol=self.tol, max_iter=self.max_iter)
            pi = ppr.pi.t()
            fused = self.lambda_graph * _minmax_rows(pi) + self.lambda_dense * _minmax_rows(scores)
            fused = fused + 1e-6 * _minmax_rows(scores)  # ties (e.g. unreachable passages) go to the dense order
            top = fused.topk(k, dim=1)
            traces = [{"seeds": s, "top": list(zip(ix, sc))} for s, ix, sc in zip(seeds.indices.tolist(), top.indices.tolist(), top.values.tolist())] if trace else None
            parts.append(RetrievalResult(top.indices.cpu(), top.values.cpu(), {"queries": float(scores.size(0)), "ppr_iterations_max": float(ppr.iterations)}, traces))
        return RetrievalResult.concat(parts)
