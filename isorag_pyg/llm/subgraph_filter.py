"""The isoperimetric filter and ISO-RAG's scoring as the ``subgraph_filter`` of PyG's ``RAGQueryLoader``."""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data

from isorag_pyg.retrieval.iso_retriever import ISORetriever
from isorag_pyg.retrieval.scoring import score_local_graphs
from isorag_pyg.transforms import IsoperimetricFilter


class ISOSubgraphFilter:
    """``subgraph_filter`` for the loader: the isoperimetric filter on the local graph, then
    ISO-RAG's scoring (:func:`~isorag_pyg.retrieval.scoring.score_local_graphs`, the function
    the retriever uses); adds ``ppr``, ``score`` (``-inf`` for an entity graph's entity nodes,
    which are not ranked), ``rank`` (the place, 0 the best, of each of the ``data.k`` passages
    the index's retrieval returns, ranked as :meth:`~isorag_pyg.retrieval.ISORetriever.top`
    ranks them: by score, near-duplicates after the rest; -1 for every other node) and
    ``num_removed_edges`` to the data. ``edge_index`` is the filter's
    output without the edges of the passages the walk leaves out (``data.left_out``); the walk
    also leaves out the edges into the query-matched entity nodes unless the knob ``reenter_entity_seeds``."""

    def __init__(self, retriever: ISORetriever):
        self.retriever = retriever
        self.transform = IsoperimetricFilter(beta=retriever.knobs.beta, phi_source="phi", leave_out="left_out")

    def __call__(self, data: Data, query: Any = None) -> Data:
        data = self.transform(data)  # data.log_phi is the retriever's φ, ablation included; data.left_out the left-out passages
        seeds = data.seed_index.unsqueeze(0)
        n = data.num_nodes
        scored = score_local_graphs(data.edge_index, seeds, data.dense_score[seeds], data.dense_score, torch.zeros(n, dtype=torch.long),
                                    torch.tensor([0, n]), self.retriever.knobs, getattr(data, "edge_weight", None),
                                    data.node_type == 0, data.entity_seed_index,
                                    self.retriever.entity_weight(data.node_idx[data.entity_seed_index].to(self.retriever.graph.device)).cpu(),
                                    getattr(data, "edge_follow", None), getattr(data, "entity_seed_vouched", None))
        data.ppr, data.score = scored.pi, scored.score
        positions, scores = self.retriever.top(scored.score, torch.zeros(n, dtype=torch.long), torch.tensor([0, n]), data.node_idx,
                                               self.retriever.sizes(int(data.k))[0])
        placed = positions[0][(positions[0] >= 0) & torch.isfinite(scores[0])]  # passages only
        data.rank = torch.full((n,), -1, dtype=torch.long)
        data.rank[placed] = torch.arange(placed.numel())
        return data
