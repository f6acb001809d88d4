"""ISO-RAG's local candidate graph as PyG's ``RAGGraphStore``."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.sampler import SamplerOutput

from isorag_pyg.llm.feature_store import ISORAGFeatureStore
from isorag_pyg.retrieval.iso_retriever import ISORetriever


class ISORAGGraphStore:
    """``RAGGraphStore`` over an index: ISO-RAG's local candidate graph around a dense pool (the
    pool plus the ``hops``-hop neighbourhood of the seeds, at most ``max_expansion`` new nodes a
    hop, and every corpus edge among them)."""

    def __init__(self, retriever: ISORetriever):
        self.retriever = retriever
        self._edge_index = retriever.graph.edge_index
        self.feature_store: ISORAGFeatureStore | None = None
        self._config: dict[str, Any] = {}

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    @config.setter
    def config(self, config: dict[str, Any] | None) -> None:
        if config is not None:
            self._config = dict(config)

    @property
    def edge_index(self) -> Tensor:
        """The corpus graph's edges (both directions)."""
        return self._edge_index

    @edge_index.setter
    def edge_index(self, edge_index: Tensor) -> None:
        if not torch.equal(edge_index, self._edge_index):
            raise ValueError("the corpus graph of an ISO-RAG graph store is the index's own")
        self._edge_index = edge_index

    def register_feature_store(self, feature_store: ISORAGFeatureStore) -> None:
        self.feature_store = feature_store

    def sample_subgraph(self, seed_nodes: Tensor, seed_edges: Tensor | None = None, **kwargs: Any) -> SamplerOutput:
        """The local graph around ``seed_nodes`` (the feature store's pool for the last query)."""
        if self.feature_store is None or self.feature_store.last_candidates is None:
            raise RuntimeError("register an ISORAGFeatureStore and retrieve seed nodes first")
        r = self.retriever
        _, _, m = r.sizes(self.feature_store.config["k"])
        local = r.local_graphs(self.feature_store.last_candidates, m, self.feature_store.last_entity_seeds)
        if not torch.equal(local.node[local.seed_pos[0]].cpu(), seed_nodes[:m].cpu()):
            raise ValueError("seed_nodes are not the feature store's pool for its last query")
        # local edges come as (upward edges, their reverses), both halves over the same slots
        edge = r.graph.edge_ids(local.edge_slot[: local.edge_slot.numel() // 2])
        return SamplerOutput(node=local.node, row=local.edge_index[0], col=local.edge_index[1], edge=edge,
                             metadata={"seed_index": local.seed_pos[0], "entity_seed_index": local.entity_pos})
