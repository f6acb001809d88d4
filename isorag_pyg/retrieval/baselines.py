"""Baselines behind the same interface: flat dense, BM25 and global (HippoRAG-style) PPR."""
from __future__ import annotations

import bm25s
import numpy as np
import torch

from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.retrieval.candidates import (
    candidate_chunk,
    check_ann_index,
    dense_candidates,
)
from isorag_pyg.retrieval.graph_index import GraphIndex
from isorag_pyg.retrieval.iso_retriever import teleport_weights
from isorag_pyg.retrieval.scoring import query_chunk_size, row_minmax
from isorag_pyg.retrieval.types import (
    Queries,
    RetrievalResult,
    check_k,
    retrieve_in_chunks,
)
from isorag_pyg.utils.ppr import personalized_pagerank


class DenseRetriever:
    """Cosine top-k over the whole corpus, in query chunks: the exact scan, or the candidates of
    an approximate nearest-neighbour index ``ann`` re-scored exactly (default: ``None``, exact)."""

    name = "dense"

    def __init__(self, index: GraphIndex, query_chunk: int | None = None, ann: ANNIndex | None = None):
        check_ann_index(ann, index)
        self.index, self.query_chunk, self.ann = index, query_chunk, ann

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = check_k(k, self.index.num_passages)

        def run(part: Queries) -> RetrievalResult:
            top = dense_candidates(self.index, part.embeddings, k, self.ann)
            return RetrievalResult.ranked(top.pool, top.pool_scores, {"queries": float(len(part))}, trace)

        return retrieve_in_chunks(queries, candidate_chunk(self.index, self.ann, self.query_chunk), run)


class BM25Retriever:
    """Okapi BM25 (bm25s) over the passage texts (title and text)."""

    name = "bm25"

    def __init__(self, texts: list[str], stopwords: str = "en", k1: float = 1.5, b: float = 0.75):
        if not texts:
            raise ValueError("BM25 needs a non-empty corpus")
        self.num_docs = len(texts)
        self.stopwords = stopwords
        self.model = bm25s.BM25(k1=k1, b=b)
        tokens = bm25s.tokenize(texts, stopwords=stopwords, show_progress=False)
        if not tokens.vocab:
            raise ValueError("BM25 found no indexable terms in the corpus (only stopwords or one-letter words)")
        self.model.index(tokens, show_progress=False)

    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = check_k(k, self.num_docs)
        if len(queries) == 0:
            raise ValueError("retrieve() needs at least one query")
        tokens = bm25s.tokenize(queries.texts, stopwords=self.stopwords, show_progress=False)
        docs, scores = self.model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        indices = torch.as_tensor(np.asarray(docs, dtype=np.int64))
        values = torch.as_tensor(np.asarray(scores, dtype=np.float32))
        return RetrievalResult.ranked(indices, values, {"queries": float(len(queries))}, trace)


class GlobalPPRRetriever:
    """Personalized PageRank on the whole, unfiltered corpus graph (as HippoRAG-style systems do).

    Seeds and teleport are those of :class:`~isorag_pyg.retrieval.ISORetriever` (top
    ``num_seeds`` by cosine, ``softmax(tau * s)``); passages are ranked by
    ``lambda_graph * minmax(pi) + lambda_dense * minmax(s_dense)`` (default: PPR alone, ties
    broken by dense score). The queries of a chunk are the columns of one ``[N, chunk]`` iterate.
    With ``edge_weights`` the walk follows edges in proportion to the index's edge weights.
    """

    name = "ppr"

    def __init__(
        self,
        index: GraphIndex,
        num_seeds: int = 5,
        alpha: float = 0.5,
        tau: float = 10.0,
        lambda_graph: float = 1.0,
        lambda_dense: float = 0.0,
        tol: float = 1e-6,
        max_iter: int = 50,
        query_chunk: int | None = None,
        edge_weights: bool = False,
    ):
        self.index = index
        self.edge_weight = index.require_edge_weight() if edge_weights else None
        self.num_seeds, self.alpha, self.tau = num_seeds, alpha, tau
        self.lambda_graph, self.lambda_dense, self.tol, self.max_iter = lambda_graph, lambda_dense, tol, max_iter
        self.query_chunk = query_chunk

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        n, num_passages = self.index.num_nodes, self.index.num_passages
        k = check_k(k, num_passages)

        def run(part: Queries) -> RetrievalResult:
            scores = self.index.scores(part.embeddings)
            seeds = scores[:, :num_passages].topk(min(self.num_seeds, num_passages), dim=1)
            teleport = torch.zeros(n, scores.size(0), device=scores.device)
            columns = torch.arange(scores.size(0), device=scores.device).unsqueeze(1).expand_as(seeds.indices)
            teleport[seeds.indices, columns] = teleport_weights(seeds.values, self.tau)
            ppr = personalized_pagerank(self.index.edge_index, teleport, self.alpha, tol=self.tol, max_iter=self.max_iter,
                                        edge_weight=self.edge_weight)
            dense = row_minmax(scores[:, :num_passages])
            # the 1e-6 dense term breaks ties (e.g. unreachable passages) by the dense order; passages only are ranked
            fused = self.lambda_graph * row_minmax(ppr.pi.t()[:, :num_passages]) + (self.lambda_dense + 1e-6) * dense
            top = fused.topk(k, dim=1)
            result = RetrievalResult.ranked(top.indices, top.values, {"queries": float(len(part)), "ppr_iterations_max": float(ppr.iterations)}, trace)
            for t, s in zip(result.traces or [], seeds.indices.tolist()):
                t["seeds"] = s
            return result

        return retrieve_in_chunks(queries, query_chunk_size(n, self.query_chunk), run)
