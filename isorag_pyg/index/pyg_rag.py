"""An index as a remote backend for PyG's :class:`torch_geometric.llm.RAGQueryLoader`.

The feature store finds the dense pool (cosine seeds first), the graph store builds ISO-RAG's
local candidate graph around it, and the subgraph filter applies the isoperimetric filter
(:class:`~isorag_pyg.transforms.IsoperimetricFilter`, φ from the index) and local PPR::

    from torch_geometric.llm import RAGQueryLoader
    feature_store, graph_store, subgraph_filter = rag_components(index, k=5)
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query("question")
    data.passage_id, data.edge_index, data.ppr, data.score   # the filtered local graph, scored

Ranking ``data.node_idx`` by ``data.score`` gives what :meth:`ISORAGIndex.retrieve` returns.
The loader asks one query at a time; the graph store reads that query's dense candidates (exact
or from the index's ANN) from the feature store it is registered with.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler import SamplerOutput

from isorag_pyg.index.answers import node_records
from isorag_pyg.index.index import ISORAGIndex
from isorag_pyg.retrieval.candidates import DenseCandidates, dense_candidates
from isorag_pyg.retrieval.iso_retriever import ISORetriever
from isorag_pyg.retrieval.scoring import score_local_graphs
from isorag_pyg.transforms import IsoperimetricFilter


class ISORAGFeatureStore:
    """``RAGFeatureStore`` over an index: passage embeddings and texts, and the query's dense pool.

    Args:
        index: the index.
        retriever: the ISO-RAG retriever whose knobs (pool size, seeds, φ) apply.
        k: passages wanted per query (sets the pool size ``over_retrieval * k``); the loader's
            ``config={"k": ...}`` changes it.
    """

    def __init__(self, index: ISORAGIndex, retriever: ISORetriever, k: int = 5):
        self.graph, self.retriever = index, retriever
        self._config: dict[str, Any] = {}
        self.config = {"k": k}
        self.last_candidates: DenseCandidates | None = None
        self.last_entity_seeds: tuple[Tensor, Tensor] | None = None

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
        return self.last_candidates.pool[0], queries.embeddings[0]

    def retrieve_seed_edges(self, query: str, **kwargs: Any) -> Tensor:
        """ISO-RAG seeds passages, not edges: always empty."""
        return torch.empty(2, 0, dtype=torch.long)

    def load_subgraph(self, sample: SamplerOutput) -> Data:
        """The local graph with features: ``x``, ``edge_index`` (local), ``node_idx`` (corpus
        rows), ``edge_idx`` (corpus edges), ``passage_id``, ``title``, ``text``, ``dense_score``,
        ``log_phi`` (the retriever's φ), ``seed_index`` (local positions of the seeds),
        ``entity_seed_index`` (local positions of the query-matched seeds: entity nodes, and
        passages seeded for an entity only they mention),
        ``node_type`` (0 passage, 1 an entity graph's entity node: id ``entity:<name>``, no text)
        and, when the retriever walks edge weights, ``edge_weight``."""
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
            entity_seed_index=sample.metadata["entity_seed_index"].cpu(),
        )
        if self.retriever.knobs.edge_weights:
            data.edge_weight = graph.require_edge_weight()[sample.edge.to(graph.device)].cpu()
        return data


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


class ISOSubgraphFilter:
    """``subgraph_filter`` for the loader: the isoperimetric filter on the local graph, then
    ISO-RAG's scoring (:func:`~isorag_pyg.retrieval.scoring.score_local_graphs`, the function
    the retriever uses); adds ``ppr``, ``score`` (``-inf`` for an entity graph's entity nodes,
    which are not ranked) and ``num_removed_edges`` to the data. ``edge_index`` is the filter's
    output; the walk also leaves out the edges into the query-matched entity nodes unless the
    knob ``reenter_entity_seeds``."""

    def __init__(self, retriever: ISORetriever):
        self.retriever = retriever
        self.transform = IsoperimetricFilter(beta=retriever.knobs.beta, phi_source="phi")

    def __call__(self, data: Data, query: Any = None) -> Data:
        data = self.transform(data)  # data.log_phi is the retriever's φ, ablation included
        seeds = data.seed_index.unsqueeze(0)
        n = data.num_nodes
        scored = score_local_graphs(data.edge_index, seeds, data.dense_score[seeds], data.dense_score, torch.zeros(n, dtype=torch.long),
                                    torch.tensor([0, n]), self.retriever.knobs, getattr(data, "edge_weight", None),
                                    data.node_type == 0, data.entity_seed_index,
                                    self.retriever.entity_weight(data.node_idx[data.entity_seed_index].to(self.retriever.graph.device)).cpu())
        data.ppr, data.score = scored.pi, scored.score
        return data


def rag_components(index: ISORAGIndex, k: int = 5, **knobs: Any) -> tuple[ISORAGFeatureStore, ISORAGGraphStore, ISOSubgraphFilter]:
    """Feature store, graph store and subgraph filter for ``RAGQueryLoader``, all with the same
    ISO-RAG knobs (the index's stored ones, then ``knobs``); retrieval runs on the CPU."""
    retriever = index.retriever("iso", device="cpu", **knobs)
    return ISORAGFeatureStore(index, retriever, k), ISORAGGraphStore(retriever), ISOSubgraphFilter(retriever)
