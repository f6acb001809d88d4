"""Baselines behind the same interface: flat dense, BM25 and global (HippoRAG-style) PPR."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from isorag_pyg.knobs import BM25Knobs, DenseKnobs, PPRKnobs
from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.retrieval.candidates import (
    candidate_chunk,
    check_ann_index,
    dense_candidates,
)
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.retrieval.scoring import fuse, query_chunk_size, row_minmax, teleport_weights
from isorag_pyg.retrieval.types import (
    Queries,
    RetrievalResult,
    check_k,
    retrieve_in_chunks,
)
from isorag_pyg.utils.ppr import personalized_pagerank


class DenseRetriever:
    """Cosine top-k over the whole corpus, in query chunks: the exact scan, or the candidates of
    an approximate nearest-neighbour index ``ann`` re-scored exactly (default: ``None``, exact).
    Knobs: :class:`~isorag_pyg.knobs.DenseKnobs`, changed by keyword arguments."""

    name = "dense"

    def __init__(self, graph: RetrievalGraph, knobs: DenseKnobs = DenseKnobs(), ann: ANNIndex | None = None, **changes: Any):
        check_ann_index(ann, graph)
        self.graph, self.knobs, self.ann = graph, knobs.replace(**changes), ann

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = check_k(k, self.graph.num_passages)

        def run(part: Queries) -> RetrievalResult:
            top = dense_candidates(self.graph, part.embeddings, k, self.ann)
            return RetrievalResult.ranked(top.pool, top.pool_scores, {"queries": float(len(part))}, trace)

        return retrieve_in_chunks(queries, candidate_chunk(self.graph, self.ann, self.knobs.query_chunk), run)


class BM25Retriever:
    """Okapi BM25 (bm25s) over the passage texts (title and text); knobs:
    :class:`~isorag_pyg.knobs.BM25Knobs`, changed by keyword arguments."""

    name = "bm25"

    def __init__(self, texts: list[str], knobs: BM25Knobs = BM25Knobs(), **changes: Any):
        import bm25s  # here: the other retrievers are queried without it

        if not texts:
            raise ValueError("BM25 needs a non-empty corpus")
        self.knobs = knobs = knobs.replace(**changes)
        self.num_docs = len(texts)
        self.model = bm25s.BM25(k1=knobs.k1, b=knobs.b)
        tokens = bm25s.tokenize(texts, stopwords=knobs.stopwords, show_progress=False)
        if not tokens.vocab:
            raise ValueError("BM25 found no indexable terms in the corpus (only stopwords or one-letter words)")
        self.model.index(tokens, show_progress=False)

    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = check_k(k, self.num_docs)
        if len(queries) == 0:
            raise ValueError("retrieve() needs at least one query")
        import bm25s

        tokens = bm25s.tokenize(queries.texts, stopwords=self.knobs.stopwords, show_progress=False)
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
    With ``edge_weights`` the walk follows edges in proportion to the graph's edge weights.
    Knobs: :class:`~isorag_pyg.knobs.PPRKnobs`, changed by keyword arguments.
    """

    name = "ppr"

    def __init__(self, graph: RetrievalGraph, knobs: PPRKnobs = PPRKnobs(), **changes: Any):
        self.graph, self.knobs = graph, knobs.replace(**changes)
        self.edge_weight = graph.require_edge_weight() if self.knobs.edge_weights else None

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        n, num_passages = self.graph.num_nodes, self.graph.num_passages
        k = check_k(k, num_passages)

        def run(part: Queries) -> RetrievalResult:
            scores = self.graph.scores(part.embeddings)
            knobs = self.knobs
            seeds = scores[:, :num_passages].topk(min(knobs.num_seeds, num_passages), dim=1)
            teleport = torch.zeros(n, scores.size(0), device=scores.device)
            columns = torch.arange(scores.size(0), device=scores.device).unsqueeze(1).expand_as(seeds.indices)
            teleport[seeds.indices, columns] = teleport_weights(seeds.values, knobs.tau)
            ppr = personalized_pagerank(self.graph.edge_index, teleport, knobs.alpha, tol=knobs.tol, max_iter=knobs.max_iter,
                                        edge_weight=self.edge_weight)
            dense = row_minmax(scores[:, :num_passages])
            # the 1e-6 dense term breaks ties (e.g. unreachable passages) by the dense order; passages only are ranked
            fused = fuse(row_minmax(ppr.pi.t()[:, :num_passages]), dense, knobs.lambda_graph, knobs.lambda_dense + 1e-6)
            top = fused.topk(k, dim=1)
            result = RetrievalResult.ranked(top.indices, top.values, {"queries": float(len(part)), "ppr_iterations_max": float(ppr.iterations)}, trace)
            for t, s in zip(result.traces or [], seeds.indices.tolist()):
                t["seeds"] = s
            return result

        return retrieve_in_chunks(queries, query_chunk_size(n, self.knobs.query_chunk), run)
