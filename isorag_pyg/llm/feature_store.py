"""The dense half of an index as PyG's ``RAGFeatureStore``: the query's dense pool and the local
graph's features."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler import SamplerOutput

from isorag_pyg.defaults import K
from isorag_pyg.index.index import ISORAGIndex
from isorag_pyg.index.results import node_records
from isorag_pyg.retrieval.candidates import DenseCandidates, dense_candidates
from isorag_pyg.retrieval.iso_retriever import ISORetriever


class ISORAGFeatureStore:
    """``RAGFeatureStore`` over an index: passage embeddings and texts, and the query's dense pool.

    Args:
        index: the index.
        retriever: the ISO-RAG retriever whose knobs (pool size, seeds, φ) apply.
        k: passages wanted per query (sets the pool size ``over_retrieval * k``); the loader's
            ``config={"k": ...}`` changes it.
    """

    def __init__(self, index: ISORAGIndex, retriever: ISORetriever, k: int = K):
        self.graph, self.retriever = index, retriever
        self._config: dict[str, Any] = {}
        self.config = {"k": k}
        self.last_candidates: DenseCandidates | None = None
        self.last_entity_seeds: tuple[Tensor, Tensor] | None = None
        self.last_entity_vouched: Tensor | None = None

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    @config.setter
    def config(self, config: dict[str, Any] | None) -> None:
        if config is None:  # RAGQueryLoader passes its own config, None by default
            return
        k = config.get("k", self._config.get("k"))
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"config k must be a positive integer, got {k!r}")
        self._config = {**self._config, **config, "k": k}

    def retrieve_seed_nodes(self, query: str, **kwargs: Any) -> tuple[Tensor, Tensor]:
        """The dense pool of ``query`` (corpus rows, best first: the first ``num_seeds`` are the
        seeds) and the query's embedding; the query-matched entity seeds are kept for the graph store."""
        queries = self.graph.encode_questions([query])
        _, pool, _ = self.retriever.sizes(self.config["k"])
        self.last_candidates = dense_candidates(self.retriever.graph, queries.embeddings, pool, self.retriever.ann)
        self.last_entity_seeds = self.retriever.entity_seeds([query])
        self.last_entity_vouched = self.retriever.vouched([query], self.last_entity_seeds, self.last_candidates)
        return self.last_candidates.pool[0], queries.embeddings[0]

    def retrieve_seed_edges(self, query: str, **kwargs: Any) -> Tensor:
        """ISO-RAG seeds passages, not edges: always empty."""
        return torch.empty(2, 0, dtype=torch.long)

    def load_subgraph(self, sample: SamplerOutput) -> Data:
        """The local graph with features: ``x``, ``edge_index`` (local), ``node_idx`` (corpus
        rows), ``edge_idx`` (corpus edges), ``passage_id``, ``title``, ``text``, ``dense_score``,
        ``log_phi`` (the retriever's φ), ``seed_index`` (local positions of the seeds),
        ``entity_seed_index`` (local positions of the query-matched seeds: entity nodes, and
        passages seeded for an entity only they mention), ``k`` (passages wanted),
        ``node_type`` (0 passage, 1 an entity graph's entity node: id ``entity:<name>``, no text),
        ``entity_seed_vouched`` (where a unique mention needs a voucher, ``vouch_share``: which of those seeds keep their share),
        ``left_out`` (passages the walk leaves out for this query:
        :meth:`~isorag_pyg.retrieval.ISORetriever.walk_left_out`)
        and, when the retriever's walk uses them, ``edge_weight`` (the graph's edge weights) and
        ``edge_follow`` (the share of each edge's transition it takes: ``backlink_weight`` on one-way
        mentions walked backwards)."""
        node = sample.node
        records = node_records(self.graph.passages, getattr(self.graph.graph, "entity_names", []), node.tolist())
        graph = self.retriever.graph
        local = node.to(graph.device)
        dense = self.last_candidates.score(torch.zeros_like(local), local).cpu()
        data = Data(
            x=graph.embeddings[local].cpu(),
            edge_index=torch.stack([sample.row, sample.col]).cpu(), num_nodes=node.numel(),
            node_idx=node.cpu(), edge_idx=sample.edge.cpu(), passage_id=[r[0] for r in records],
            title=[r[1] for r in records], text=[r[2] for r in records], dense_score=dense,
            node_type=(node >= len(self.graph)).long().cpu(),
            log_phi=self.retriever.log_phi[node.to(self.retriever.log_phi.device)].cpu(), seed_index=sample.metadata["seed_index"].cpu(),
            left_out=self.retriever.walk_left_out(local, torch.stack([sample.row, sample.col]).to(graph.device), sample.edge.to(graph.device),
                                                  sample.metadata["seed_index"].to(graph.device)).cpu(),
            entity_seed_index=sample.metadata["entity_seed_index"].cpu(), k=self.config["k"],
        )
        if self.last_entity_vouched is not None:
            data.entity_seed_vouched = self.last_entity_vouched.cpu()
        weight, follow = self.retriever.walk_edges(sample.edge.to(graph.device))
        if weight is not None:
            data.edge_weight = weight.cpu()
        if follow is not None:
            data.edge_follow = follow.cpu()
        return data
