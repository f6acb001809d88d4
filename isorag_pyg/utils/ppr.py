r"""Deterministic personalized PageRank by power iteration, batched as one sparse matmul.

For a graph with column-stochastic transition :math:`W` (:math:`W_{vu} = 1/\deg^+(u)` for an
edge :math:`u \to v`), teleport distribution :math:`r` and damping :math:`\alpha`:

.. math::
    \pi \leftarrow (1-\alpha)\, r + \alpha\,\big(W\pi + r \cdot \textstyle\sum_{u\ \mathrm{dangling}} \pi_u\big)

Mass at dangling nodes (no out-edges) goes back through :math:`r`, so every column of
:math:`\pi` keeps summing to 1; so does the share of an edge's transition that the walk does not
follow (``edge_follow``). Many queries run at once either as a block-diagonal batch of
local graphs (``batch`` assigns nodes to queries, one teleport column) or as several teleport
columns on one graph.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from isorag_pyg.knobs import PPRKnobs, check_alpha
from isorag_pyg.utils.csr import neighbor_edges, rowptr_from_sorted_rows

# torch warns on a process's first sparse CSR tensor that their support "is in beta state": a note
# for torch's users of the sparse API, not for those of a retriever; silenced here, where the
# tensors are made, for this one message (importing PyG used to hide it as a side effect)
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state", category=UserWarning)


@dataclass
class PPRResult:
    pi: Tensor  # [N, C]
    iterations: int
    converged: bool


def transition_entries(edge_index: Tensor, num_nodes: int, edge_weight: Tensor | None = None,
                       edge_follow: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Entries of the transition :math:`W` as ``(row, col, value)`` (``W[v, u]`` for edge ``u -> v``:
    its weight over ``u``'s total, times its ``edge_follow``) and every node's restart share: the
    part of its mass no entry carries (1 for a dangling node), which goes back through the teleport."""
    src, dst = edge_index
    weight = torch.ones(src.numel(), device=src.device) if edge_weight is None else edge_weight.float()
    out_weight = weight.new_zeros(num_nodes).scatter_add_(0, src, weight)  # what PyG's scatter(reduce="sum") runs
    values = weight / out_weight[src].clamp_min(torch.finfo(weight.dtype).tiny)
    restart = (out_weight == 0).float()
    if edge_follow is not None:
        if edge_follow.shape != src.shape or (edge_follow.numel() and not bool(((edge_follow >= 0) & (edge_follow <= 1)).all())):
            raise ValueError(f"edge_follow must hold one share in [0, 1] per edge ({src.numel()}), got shape {tuple(edge_follow.shape)}")
        follow = edge_follow.to(values.dtype)
        restart = restart.scatter_add_(0, src, values * (1 - follow)).clamp_(max=1)
        values = values * follow
    return dst, src, values, restart


def csr_matrix(row: Tensor, col: Tensor, values: Tensor, num_nodes: int) -> Tensor:
    """A square sparse CSR tensor from unsorted ``(row, col, value)`` entries (int32 indices when
    they fit: the sparse kernels then skip a conversion on every product)."""
    order = torch.argsort(row * num_nodes + col)
    crow, col = rowptr_from_sorted_rows(row[order], num_nodes), col[order]
    if max(num_nodes, col.numel()) < torch.iinfo(torch.int32).max:
        crow, col = crow.int(), col.int()
    return torch.sparse_csr_tensor(crow, col, values[order], (num_nodes, num_nodes), check_invariants=False)


def personalized_pagerank(
    edge_index: Tensor,
    teleport: Tensor,
    alpha: float = PPRKnobs.alpha,
    batch: Tensor | None = None,
    num_graphs: int | None = None,
    tol: float = PPRKnobs.tol,
    max_iter: int = PPRKnobs.max_iter,
    edge_weight: Tensor | None = None,
    edge_follow: Tensor | None = None,
) -> PPRResult:
    r"""Power iteration until the largest per-graph L1 change is below ``tol`` or ``max_iter``.

    Args:
        edge_index: ``[2, E]`` directed edges ``u -> v`` (both directions for undirected graphs).
        teleport: ``[N]`` or ``[N, C]``; each column sums to 1 within each graph of ``batch``.
        alpha: probability of following an edge, the damping factor; PyG's
            :func:`~torch_geometric.utils.get_ppr` calls the restart probability ``1 - alpha``
            its ``alpha`` (default: :class:`~isorag_pyg.knobs.PPRKnobs`'s, ``0.5``).
        batch: ``[N]`` graph of each node for a block-diagonal batch, sorted as in a PyG
            :class:`~torch_geometric.data.Batch` (default: one graph).
        num_graphs: number of graphs in ``batch`` (default: ``batch.max() + 1``).
        tol: L1 tolerance per graph and column; float64 teleports iterate in float64, others in
            float32, whose rounding makes tolerances below about ``1e-7`` unreachable (default: ``1e-6``, as in
            :class:`~isorag_pyg.knobs.PPRKnobs`).
        max_iter: iteration cap (default: :class:`~isorag_pyg.knobs.PPRKnobs`'s, ``50``).
        edge_weight: optional ``[E]`` non-negative weights (default: unweighted).
        edge_follow: optional ``[E]`` shares in [0, 1]: the walk takes that share of an edge's
            transition probability, the rest goes back through ``r`` (as a dangling node's
            mass does): the edge is followed less, and no other edge more (default: all of it).

    Example:
        >>> ei = torch.tensor([[0, 1], [1, 0]])
        >>> personalized_pagerank(ei, torch.tensor([1.0, 0.0]), alpha=0.5).pi.squeeze(1)
        tensor([0.6667, 0.3333])
    """
    check_alpha(alpha)
    r = teleport.unsqueeze(1) if teleport.dim() == 1 else teleport
    r = r if r.dtype == torch.float64 else r.float()
    n = r.size(0)
    if batch is None:
        batch, num_graphs = torch.zeros(n, dtype=torch.long, device=r.device), 1
    else:
        if n and bool((batch[1:] < batch[:-1]).any()):
            raise ValueError("batch must be sorted (nodes grouped by graph, as in a PyG Batch)")
        if num_graphs is None:
            num_graphs = int(batch[-1]) + 1 if n else 0
    lengths = torch.bincount(batch, minlength=num_graphs)
    row, col, values, restart = transition_entries(edge_index, n, edge_weight, edge_follow)
    leaky = restart.nonzero().squeeze(1)
    leaky_graph, leaky_share = batch[leaky], restart[leaky].to(r.dtype)
    fold = r.size(1) == 1 and leaky.numel() > 0
    if fold:
        # one teleport column: a node sends its restart share back through r, so its column of W
        # can simply hold r times that share (restricted to its own graph); the iteration is then one matmul
        support = r[:, 0].nonzero().squeeze(1)
        position, slot = neighbor_edges(rowptr_from_sorted_rows(batch[support], num_graphs), leaky_graph)
        row, col = torch.cat([row, support[slot]]), torch.cat([col, leaky[position]])
        values = torch.cat([values.to(r.dtype), r[support[slot], 0] * leaky_share[position]])
    W = csr_matrix(row, col, values.to(r.dtype), n)

    def largest_change(new: Tensor, old: Tensor) -> Tensor:  # max over graphs and columns of the L1 change
        if num_graphs == 1:
            return torch.dist(new, old, 1) if new.size(1) == 1 else (new - old).abs_().sum(0).max()
        return torch.segment_reduce((new - old).abs_(), "sum", lengths=lengths, axis=0).max()

    stay = (1.0 - alpha) * r
    pi = r.clone()
    converged, iterations = n == 0, 0
    while not converged and iterations < max_iter:
        new = torch.addmm(stay, W, pi, alpha=alpha)
        if leaky.numel() and not fold:
            lost = r.new_zeros(num_graphs, r.size(1)).index_add_(0, leaky_graph, pi[leaky] * leaky_share.unsqueeze(1))
            new.addcmul_(r, lost if num_graphs == 1 else lost[batch], value=alpha)
        change = largest_change(new, pi)
        pi = new
        iterations += 1
        converged = change.item() < tol
    return PPRResult(pi, iterations, converged)
