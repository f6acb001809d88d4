"""HippoRAG 2's retrieval walk on an index's own graph: the strongest published graph-RAG baseline."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from isorag_pyg.knobs import HippoRAGKnobs
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.retrieval.scoring import fuse, query_chunk_size, row_minmax
from isorag_pyg.retrieval.types import Queries, RetrievalResult, check_k, retrieve_in_chunks
from isorag_pyg.utils.ppr import personalized_pagerank


class HippoRAGRetriever:
    """HippoRAG 2's global walk (Gutiérrez et al., "From RAG to Memory", 2025) without its LLM.

    Personalized PageRank over the whole passage + entity graph. The teleport vector gives each
    entity node the question names (``entity_matcher``; at most ``linking_top_k``, heaviest first)
    the weight 1 / (the passages that mention it), a passage that alone mentions an entity the
    question names the weight 1, and every passage ``passage_node_weight`` times its min-max scaled
    cosine with the question; the walk follows an edge with probability ``alpha``. Passages are
    ranked by their PPR mass (ties by cosine). A question that names no entity is answered by
    dense retrieval, as HippoRAG 2 does when it finds no fact for a question.

    Where it differs from HippoRAG 2: the entities come from the index's extractor (rules by
    default, no LLM triples), questions are matched by the rule extractor instead of an LLM's fact
    retrieval and recognition-memory filter, there are no synonymy edges, and the passages are
    embedded by the index's encoder. Knobs: :class:`~isorag_pyg.knobs.HippoRAGKnobs`.

    Args:
        graph: the corpus graph with its entity nodes, prepared for retrieval.
        knobs: the knobs (default: :class:`~isorag_pyg.knobs.HippoRAGKnobs`'s, HippoRAG 2's own).
        entity_matcher: questions -> the rows each names (entity nodes and unique-mention
            passages; :class:`~isorag_pyg.graph.query_entities.QueryEntityMatcher`); ``None``:
            none, so every question is answered by dense retrieval.
        **changes: knobs changed from ``knobs``.
    """

    name = "hipporag"

    def __init__(self, graph: RetrievalGraph, knobs: HippoRAGKnobs = HippoRAGKnobs(),
                 entity_matcher: Callable[[Sequence[str]], list[list[int]]] | None = None, **changes: Any):
        self.graph, self.knobs, self.entity_matcher = graph, knobs.replace(**changes), entity_matcher
        self.edge_weight = graph.require_edge_weight() if self.knobs.edge_weights else None
        passages = (graph.edge_index[0] < graph.num_passages) & (graph.edge_index[1] >= graph.num_passages)
        # an entity node's passages: its mention edges (relation edges between entities do not count)
        self.passage_count = torch.bincount(graph.edge_index[1, passages], minlength=graph.num_nodes).clamp_min(1).float()

    def seed_weights(self, questions: Sequence[str]) -> list[dict[int, float]]:
        """Each question's entity seeds (graph row -> teleport weight before normalisation)."""
        if self.entity_matcher is None:
            return [{} for _ in questions]
        out = []
        for rows in self.entity_matcher(questions):
            weights = {r: 1.0 if r < self.graph.num_passages else float(1.0 / self.passage_count[r]) for r in rows}
            out.append(dict(sorted(weights.items(), key=lambda item: (-item[1], item[0]))[: self.knobs.linking_top_k]))
        return out

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        k = check_k(k, self.graph.num_passages)
        return retrieve_in_chunks(queries, query_chunk_size(self.graph.num_nodes, self.knobs.query_chunk), lambda part: self._chunk(part, k, trace))

    def _chunk(self, queries: Queries, k: int, trace: bool) -> RetrievalResult:
        n, num_passages, knobs = self.graph.num_nodes, self.graph.num_passages, self.knobs
        dense = row_minmax(self.graph.scores(queries.embeddings)[:, :num_passages])  # [Q, N]
        seeds = self.seed_weights(queries.texts)
        teleport = torch.zeros(n, len(queries), device=dense.device)
        teleport[:num_passages] = knobs.passage_node_weight * dense.t()
        for q, weights in enumerate(seeds):
            for row, weight in weights.items():
                teleport[row, q] += weight
        teleport = teleport / teleport.sum(0, keepdim=True).clamp_min(torch.finfo(teleport.dtype).tiny)
        ppr = personalized_pagerank(self.graph.edge_index, teleport, knobs.alpha, tol=knobs.tol, max_iter=knobs.max_iter, edge_weight=self.edge_weight)
        graph_score = row_minmax(ppr.pi.t()[:, :num_passages])
        named = torch.tensor([bool(w) for w in seeds], device=dense.device).unsqueeze(1)
        # the 1e-6 dense term breaks ties by cosine; a question that names no entity is ranked by cosine alone
        fused = torch.where(named, fuse(graph_score, dense, 1.0, 1e-6), dense)
        top = fused.topk(k, dim=1)
        result = RetrievalResult.ranked(top.indices, top.values, {"queries": float(len(queries)), "ppr_iterations_max": float(ppr.iterations)}, trace)
        for t, weights in zip(result.traces or [], seeds):
            t["entity_seeds"] = sorted(weights)
        return result
