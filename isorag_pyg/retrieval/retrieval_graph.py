"""The corpus graph prepared once for retrieval: clean CSR and unit-norm embeddings on a device."""
from __future__ import annotations

import torch
from torch import Tensor

from isorag_pyg.utils.csr import is_clean_undirected, rowptr_from_sorted_rows
from isorag_pyg.utils.isoperimetric import clean_edge_index


class RetrievalGraph:
    """Undirected, self-loop-free, coalesced graph in CSR form plus normalised embeddings.

    Besides the full CSR (``rowptr``, ``col``) it keeps every undirected edge once, stored at the
    endpoint of lower degree (ties: lower id) in ``up_rowptr``, ``up_col`` and ``up_edge_index``:
    a hub then has a short list, so finding the edges among a set of nodes stays cheap.

    Args:
        edge_index: ``[2, E]`` corpus edges (symmetrised, self-loops and duplicates dropped).
        embeddings: ``[N, d]`` passage embeddings.
        device: where retrieval runs. (default: ``"cpu"``)
        normalized: the embeddings are already unit-norm float32 (as an
            :class:`~isorag_pyg.ISORAGIndex` stores them), so they are used as they are, without
            a copy (a memory-mapped index stays mapped). (default: ``False``)
        edge_weight: ``[E]`` non-negative edge weights; ``edge_weight`` then holds each edge's
            weight aligned with ``edge_index`` (the two directions of an edge and duplicates are
            merged by their mean), for retrievers that walk weighted edges. (default: ``None``)
        num_passages: the first ``num_passages`` nodes are passages, the rest other nodes (an
            entity graph's entities, with their own vectors in ``embeddings``): retrievers seed
            and rank passages only. (default: every node is a passage)
        edge_backlink: ``[E]`` bool, the edges of ``edge_index`` that exist only as the reverse of
            a mention (the passage whose title is mentioned -> the mentioning one), for retrievers
            that walk them at a lower weight; ``edge_index`` must then be clean already (a saved
            index's or a build's graph). (default: ``None``, none)
        edge_mention: ``[E]`` bool, the edges of ``edge_index`` along which a passage names the
            other's title (a mention in its own direction, not its reverse), for retrievers that
            trust what the corpus's own passages name; ``edge_index`` must then be clean already.
            (default: ``None``, none)
    """

    def __init__(self, edge_index: Tensor, embeddings: Tensor, device: torch.device | str = "cpu", normalized: bool = False,
                 edge_weight: Tensor | None = None, num_passages: int | None = None, edge_backlink: Tensor | None = None,
                 edge_mention: Tensor | None = None):
        if embeddings.dim() != 2 or embeddings.size(0) == 0:
            raise ValueError(f"embeddings must be a non-empty [N, d] matrix, got {tuple(embeddings.shape)}")
        if num_passages is not None and not 0 < num_passages <= embeddings.size(0):
            raise ValueError(f"num_passages must be in [1, {embeddings.size(0)}], got {num_passages}")
        if not torch.isfinite(embeddings).all():
            raise ValueError("embeddings contain NaN or inf")
        self.device = torch.device(device)
        self.num_nodes = embeddings.size(0)
        self.num_passages = self.num_nodes if num_passages is None else num_passages
        if edge_index.numel() and int(edge_index.max()) >= self.num_nodes:
            raise ValueError(f"edge_index refers to node {int(edge_index.max())} but there are {self.num_nodes} passages")
        if edge_weight is not None and (edge_weight.numel() != edge_index.size(1)
                                        or not (torch.isfinite(edge_weight).all() and (edge_weight >= 0).all())):
            raise ValueError(f"edge_weight must hold one finite, non-negative weight per edge ({edge_index.size(1)}), got {edge_weight.numel()}")
        edge_index, edge_weight = edge_index.long(), None if edge_weight is None else edge_weight.float()
        # a saved index's graph is clean already: taken as it is, without importing torch_geometric (more than a second)
        clean = is_clean_undirected(edge_index, self.num_nodes, edge_weight)
        for name, flags in (("edge_backlink", edge_backlink), ("edge_mention", edge_mention)):
            if flags is not None and (flags.shape != edge_index[0].shape or not clean):
                raise ValueError(f"{name} needs one flag per edge of a clean (symmetric, coalesced, self-loop-free) edge_index")
        if not clean:
            edge_index, edge_weight = _clean(edge_index, edge_weight, self.num_nodes)
        self.edge_index = edge_index.to(self.device)
        self.rowptr = rowptr_from_sorted_rows(self.edge_index[0], self.num_nodes)
        self.col = self.edge_index[1]
        degree = self.rowptr[1:] - self.rowptr[:-1]
        src, dst = self.edge_index
        upward = (degree[src] < degree[dst]) | ((degree[src] == degree[dst]) & (src < dst))
        self.up_edge_index = self.edge_index[:, upward]  # still sorted by source
        # columns in edge_index of every upward edge and of its reverse (edge_index is sorted by src * N + dst)
        self.up_edge_id = upward.nonzero().squeeze(1)
        keys = src * self.num_nodes + dst
        self.up_reverse_id = torch.searchsorted(keys, dst[upward] * self.num_nodes + src[upward])
        self.up_rowptr = rowptr_from_sorted_rows(self.up_edge_index[0], self.num_nodes)
        self.up_col = self.up_edge_index[1]
        self.edge_weight = None if edge_weight is None else edge_weight.to(self.device)
        self.edge_backlink = None if edge_backlink is None or not edge_backlink.any() else edge_backlink.bool().to(self.device)
        self.edge_mention = None if edge_mention is None or not edge_mention.any() else edge_mention.bool().to(self.device)
        if normalized and embeddings.dtype == torch.float32:
            self.embeddings = embeddings.to(self.device)
        else:
            self.embeddings = torch.nn.functional.normalize(embeddings.float(), dim=-1).to(self.device)
        self.dim = self.embeddings.size(1)

    def edge_ids(self, slot: Tensor) -> Tensor:
        """Columns of ``edge_index`` of the upward edges ``slot`` (as a local graph's
        ``edge_slot`` names them), then of their reverses."""
        return torch.cat([self.up_edge_id[slot], self.up_reverse_id[slot]])

    def times_named(self) -> Tensor:
        """``[N]`` how many passages name each node's title (:attr:`edge_mention` edges into it)."""
        if self.edge_mention is None:
            return torch.zeros(self.num_nodes, dtype=torch.long, device=self.device)
        return torch.bincount(self.edge_index[1][self.edge_mention], minlength=self.num_nodes)

    def require_edge_weight(self) -> Tensor:
        """The edge weights, for a retriever asked to walk them."""
        if self.edge_weight is None:
            raise ValueError("edge_weights=True needs a graph with edge weights")
        return self.edge_weight

    def unit_queries(self, query_embeddings: Tensor) -> Tensor:
        """Query embeddings checked (size, finite), normalised and moved to the device."""
        if query_embeddings.size(-1) != self.dim:
            raise ValueError(f"query embeddings have size {query_embeddings.size(-1)}, passages {self.dim}")
        if not torch.isfinite(query_embeddings).all():
            raise ValueError("query embeddings contain NaN or inf")
        return torch.nn.functional.normalize(query_embeddings.float().to(self.device), dim=-1)

    def scores(self, query_embeddings: Tensor) -> Tensor:
        """Cosine scores ``[Q, N]`` of unit-norm queries against every node (passages first)."""
        return self.unit_queries(query_embeddings) @ self.embeddings.t()


def _clean(edge_index: Tensor, edge_weight: Tensor | None, num_nodes: int) -> tuple[Tensor, Tensor | None]:
    """The graph symmetrised, without self-loops, coalesced (weights of merged edges: their mean),
    by PyG's functions (imported here: only a graph that is not clean already needs them)."""
    from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

    if edge_weight is None:
        return clean_edge_index(to_undirected(edge_index, num_nodes=num_nodes), num_nodes), None
    edge_index, edge_weight = to_undirected(edge_index, edge_weight, num_nodes=num_nodes, reduce="mean")
    return coalesce(*remove_self_loops(edge_index, edge_weight), num_nodes=num_nodes, reduce="mean")
