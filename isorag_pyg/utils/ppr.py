r"""Deterministic personalized PageRank by power iteration, batched as one sparse matmul.

For a graph with column-stochastic transition :math:`W` (:math:`W_{vu} = 1/\deg^+(u)` for an
edge :math:`u \to v`), teleport distribution :math:`r` and damping :math:`\alpha`:

.. math::
    \pi \leftarrow (1-\alpha)\, r + \alpha\,\big(W\pi + r \cdot \textstyle\sum_{u\ \mathrm{dangling}} \pi_u\big)

Mass at dangling nodes (no out-edges) goes back through :math:`r`, so every column of
:math:`\pi` keeps summing to 1. Many queries run at once either as a block-diagonal batch of
local graphs (``batch`` assigns nodes to queries, one teleport column) or as several teleport
columns on one graph.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.utils import scatter

from isorag_pyg.utils.csr import rowptr_from_sorted_rows


@dataclass
class PPRResult:
    pi: Tensor  # [N, C]
    iterations: int
    converged: bool


def transition_matrix(edge_index: Tensor, num_nodes: int, edge_weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Column-stochastic :math:`W` as a sparse CSR tensor, and the dangling-node mask."""
    src, dst = edge_index
    weight = torch.ones(src.numel(), device=src.device) if edge_weight is None else edge_weight.float()
    out_weight = scatter(weight, src, dim=0, dim_size=num_nodes, reduce="sum")
    values = weight / out_weight[src].clamp_min(torch.finfo(weight.dtype).tiny)
    order = torch.argsort(dst * num_nodes + src)
    crow = rowptr_from_sorted_rows(dst[order], num_nodes)
    W = torch.sparse_csr_tensor(crow, src[order], values[order], (num_nodes, num_nodes), check_invariants=False)
    return W, out_weight == 0


def personalized_pagerank(
    edge_index: Tensor,
    teleport: Tensor,
    alpha: float = 0.5,
    batch: Tensor | None = None,
    num_graphs: int | None = None,
    tol: float = 1e-6,
    max_iter: int = 100,
    edge_weight: Tensor | None = None,
) -> PPRResult:
    r"""Power iteration until the largest per-graph L1 change is below ``tol`` or ``max_iter``.

    Args:
        edge_index: ``[2, E]`` directed edges ``u -> v`` (both directions for undirected graphs).
        teleport: ``[N]`` or ``[N, C]``; each column sums to 1 within each graph of ``batch``.
        alpha: probability of following an edge (default: ``0.5``).
        batch: ``[N]`` graph of each node for a block-diagonal batch (default: one graph).
        num_graphs: number of graphs in ``batch`` (default: ``batch.max() + 1``).
        tol: L1 tolerance per graph and column (default: ``1e-6``).
        max_iter: iteration cap (default: ``100``).
        edge_weight: optional ``[E]`` non-negative weights (default: unweighted).

    Example:
        >>> ei = torch.tensor([[0, 1], [1, 0]])
        >>> personalized_pagerank(ei, torch.tensor([1.0, 0.0]), alpha=0.5).pi.squeeze(1)
        tensor([0.6667, 0.3333])
    """
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must lie in [0, 1), got {alpha}")
    r = teleport.unsqueeze(1) if teleport.dim() == 1 else teleport
    r = r.float()
    n = r.size(0)
    if batch is None:
        batch = torch.zeros(n, dtype=torch.long, device=r.device)
        num_graphs = 1
    elif num_graphs is None:
        num_graphs = int(batch.max()) + 1 if n else 0
    W, dangling = transition_matrix(edge_index, n, edge_weight)
    dangling = dangling.float().unsqueeze(1)

    def per_graph(values: Tensor) -> Tensor:  # [N, C] -> [num_graphs, C] sums
        if num_graphs == 1:
            return values.sum(0, keepdim=True)
        return values.new_zeros(num_graphs, values.size(1)).index_add_(0, batch, values)

    pi = r.clone()
    converged, iterations = n == 0, 0
    while not converged and iterations < max_iter:
        lost = per_graph(pi * dangling)
        new = alpha * (W @ pi + r * (lost if num_graphs == 1 else lost[batch])) + (1.0 - alpha) * r
        change = per_graph((new - pi).abs())
        pi = new
        iterations += 1
        converged = bool(change.max() < tol)
    return PPRResult(pi, iterations, converged)
