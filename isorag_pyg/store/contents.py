"""What an index holds about its corpus, as one immutable record: a build, a load and an update
each make a new one (nothing is patched in place)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from isorag_pyg.store.passages import PassageStore

if TYPE_CHECKING:
    from torch_geometric.data import Data


@dataclass(frozen=True)
class StoredGraph:
    """A saved index's corpus graph as read from its files: what retrieval reads of it, without
    PyG's ``Data`` (importing torch_geometric takes longer than answering a question);
    :meth:`to_data` gives the ``Data`` that training, updates and the PyG stores work on.

    Attributes:
        x: ``[num_nodes, d]`` the passages' embeddings, then the entity nodes' vectors.
        edge_index, edge_weight, edge_source: the stored edges (undirected, coalesced).
        num_passages: the passages among the nodes (rows ``0..num_passages-1``).
        builders: the graph builders, in the order of ``edge_source``'s bits; ``leak``: whether
            one of them read the evaluated questions.
        entity_names: an entity graph's entity nodes (rows after the passages); ``unique_mentions``:
            its entities only one passage mentions (entity key -> passage row).
        edge_backlink: ``[E]`` bool, the edges that exist only as the reverse of a mention
            (:data:`~isorag_pyg.graph.builders.DIRECTED_BUILDERS`); ``None`` for an index
            saved before they were recorded.
    """

    x: Tensor
    edge_index: Tensor
    edge_weight: Tensor
    edge_source: Tensor
    num_passages: int
    builders: list[str]
    leak: bool
    entity_names: list[str] = field(default_factory=list)
    unique_mentions: dict[str, int] = field(default_factory=dict)
    edge_backlink: Tensor | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.x.size(0))

    def to_data(self) -> Data:
        """The graph as the PyG ``Data`` a build makes (``node_type``: 0 for passages, 1 for entities)."""
        from torch_geometric.data import Data

        data = Data(x=self.x, edge_index=self.edge_index, edge_weight=self.edge_weight, edge_source=self.edge_source, num_nodes=self.num_nodes)
        data.builders, data.leak, data.num_passages = list(self.builders), self.leak, self.num_passages
        data.entity_names, data.unique_mentions = list(self.entity_names), dict(self.unique_mentions)
        data.node_type = (torch.arange(self.num_nodes) >= self.num_passages).long()
        if self.edge_backlink is not None:
            data.edge_backlink = self.edge_backlink
        return data


@dataclass(frozen=True)
class IndexContents:
    """Passages and everything computed from them.

    Attributes:
        passages: the passages by corpus row.
        embeddings: ``[N, d]`` unit-norm float32 passage embeddings.
        graph: the corpus graph (``edge_index``, ``edge_weight``, ``edge_source``): a PyG ``Data``,
            or for an opened index the :class:`StoredGraph` read from its files.
        log_phi: ``[N]`` log isoperimetric profile under the index's φ recipe.
        bridging: ``[N]`` how much each node inflates its neighbours' profiles under the same
            recipe (:func:`~isorag_pyg.utils.bridging.bridging_score`): high for a passage that
            alone ties unrelated regions together.
        statistics: the graph's statistics, its builders (in order) and the leak flag
            (:func:`~isorag_pyg.graph.graph_statistics`).
        corpus_hash: identifies the passages (:func:`~isorag_pyg.index.corpus.corpus_hash`).
        z: ``[N, dim]`` f_θ's ball coordinates (``None`` without f_θ).
        knn_edges: the k-NN builder's directed lists, kept for updates (``None`` without it).
    """

    passages: PassageStore
    embeddings: Tensor
    graph: Data | StoredGraph
    log_phi: Tensor
    bridging: Tensor
    statistics: dict[str, Any]
    corpus_hash: str
    z: Tensor | None = None
    knn_edges: Tensor | None = None

    def replace(self, **changes: Any) -> IndexContents:
        return dataclasses.replace(self, **changes)

    def with_data(self) -> IndexContents:
        """These contents with the graph as a PyG ``Data`` (built from a :class:`StoredGraph`)."""
        return self.replace(graph=self.graph.to_data()) if isinstance(self.graph, StoredGraph) else self
