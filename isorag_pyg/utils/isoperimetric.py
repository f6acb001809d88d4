r"""The hyperbolic isoperimetric profile :math:`\varphi` of every node, in log space.

For ball coordinates :math:`z_u` the conformal factor is
:math:`\lambda(z) = 2 / (1 - c\lVert z\rVert^2)` and a node's volume is
:math:`v(u) = \lambda(z_u)^p`. With the closed 1-hop set :math:`S_u = \{u\} \cup N(u)` and the
2-hop shell :math:`\partial S_u` (distinct nodes at distance exactly 2 from :math:`u`),

.. math::
    \varphi_u = \frac{V(\partial S_u)}{V(S_u) + \epsilon}, \qquad V(A) = \sum_{w \in A} v(w).

Everything is computed as logarithms (``logsumexp`` over scatter groups), so :math:`\lambda^p`
never overflows. Graphs are read as given: :math:`N(u)` is the set of targets of ``u``'s
edges (``edge_index[0] == u``); pass an undirected ``edge_index`` (both directions) for the
symmetric profile. Self-loops and duplicate edges are ignored.
"""
from __future__ import annotations

import math
from typing import Iterator

import torch
from torch import Tensor
from torch_geometric.utils import coalesce, remove_self_loops, scatter

from isorag_pyg.utils.csr import expand_neighbors, rowptr_from_sorted_rows

#: Paths of length two expanded at once when enumerating 2-hop shells (bounds peak memory).
DEFAULT_PATH_BUDGET = 1 << 24


def log_conformal_factor(z: Tensor, c: float = 1.0) -> Tensor:
    r""":math:`\log\lambda_c(z) = \log 2 - \log(1 - c\lVert z\rVert^2)`, finite up to the boundary."""
    sq = (z.double() ** 2).sum(dim=-1) * c
    gap = (1.0 - sq).clamp_min(torch.finfo(torch.float64).tiny)
    return math.log(2.0) - torch.log(gap)


def log_volume(z: Tensor, p: float = 1.0, c: float = 1.0) -> Tensor:
    r""":math:`\log v(u) = p \log\lambda_c(z_u)` (float64); ``p = 0`` gives every node volume 1."""
    if not (math.isfinite(p) and p >= 0):
        raise ValueError(f"the volume exponent p must be finite and >= 0, got {p}")
    return p * log_conformal_factor(z, c)


def origin_volume(p: float) -> float:
    r"""Volume :math:`\lambda(0)^p = 2^p` of a node at the origin (any curvature): the unit of
    ``shell_floor``."""
    return 2.0**p


def scatter_logsumexp(src: Tensor, index: Tensor, dim_size: int) -> Tensor:
    """``log(sum(exp(src)))`` per group of ``index``; empty groups give ``-inf``."""
    out = torch.full((dim_size,), float("-inf"), dtype=src.dtype, device=src.device)
    if src.numel() == 0:
        return out
    peak = scatter(src, index, dim=0, dim_size=dim_size, reduce="max")
    count = scatter(torch.ones_like(src), index, dim=0, dim_size=dim_size, reduce="sum")
    peak = torch.where(count > 0, peak, torch.zeros_like(peak))
    total = scatter((src - peak[index]).exp(), index, dim=0, dim_size=dim_size, reduce="sum")
    present = count > 0
    out[present] = total[present].log() + peak[present]
    return out


def clean_edge_index(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Drop self-loops and duplicates, sort by source (CSR order)."""
    edge_index, _ = remove_self_loops(edge_index)
    return coalesce(edge_index, num_nodes=num_nodes)


def two_hop_shell_pairs(
    edge_index: Tensor, num_nodes: int, path_budget: int = DEFAULT_PATH_BUDGET
) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield ``(u, w)`` chunks of distinct pairs with ``w`` at distance exactly 2 from ``u``.

    ``edge_index`` must be clean (:func:`clean_edge_index`). Sources are processed in blocks
    whose 2-paths fit in ``path_budget``; cost is linear in the number of 2-paths.
    """
    row, col = edge_index
    rowptr = rowptr_from_sorted_rows(row, num_nodes)
    deg = rowptr[1:] - rowptr[:-1]
    paths_per_node = scatter(deg[col], row, dim=0, dim_size=num_nodes, reduce="sum")
    ends = paths_per_node.cumsum(0)
    start = 0
    while start < num_nodes:
        base = ends[start - 1] if start > 0 else ends.new_zeros(())
        stop = int(torch.searchsorted(ends, base + path_budget, right=True))
        stop = max(stop, start + 1)
        e0, e1 = int(rowptr[start]), int(rowptr[stop])
        if e1 > e0:
            yield _shell_block(row[e0:e1], col[e0:e1], rowptr, col, num_nodes)
        start = stop


def _shell_block(src: Tensor, mid: Tensor, rowptr: Tensor, col: Tensor, n: int) -> tuple[Tensor, Tensor]:
    position, far = expand_neighbors(rowptr, col, mid)
    keys = torch.unique(src[position] * n + far)  # sorted
    one_hop = src * n + mid  # sorted: the edge list is in CSR order
    slot = torch.searchsorted(one_hop, keys).clamp_max(one_hop.numel() - 1)
    u, w = keys // n, keys % n
    keep = (u != w) & (one_hop[slot] != keys)
    return u[keep], w[keep]


def log_isoperimetric_profile(
    edge_index: Tensor,
    log_vol: Tensor,
    eps: float = 1e-8,
    path_budget: int = DEFAULT_PATH_BUDGET,
    shell_eps: float = 0.0,
) -> Tensor:
    r"""Return :math:`\log\varphi_u` for every node (``-inf`` where the 2-hop shell is empty).

    Args:
        edge_index: ``[2, E]`` edges; self-loops and duplicates are ignored.
        log_vol: ``[N]`` per-node log-volumes, e.g. from :func:`log_volume`.
        eps: the :math:`\epsilon` added to :math:`V(S_u)` (default: ``1e-8``).
        path_budget: 2-paths expanded per block (default: ``2**24``).
        shell_eps: a volume added to :math:`V(\partial S_u)`, so that an empty shell gives a
            small positive :math:`\varphi` instead of 0 (:math:`\log\varphi = -\infty`, which
            fails the ratio test against every non-empty neighbour). ``0`` is the plain
            definition. (default: ``0.0``)

    Example:
        >>> import torch
        >>> ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0 - 1 - 2
        >>> log_isoperimetric_profile(ei, torch.zeros(3)).exp()
        tensor([0.5000, 0.0000, 0.5000], dtype=torch.float64)
    """
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if shell_eps < 0:
        raise ValueError(f"shell_eps must be >= 0, got {shell_eps}")
    log_vol = log_vol.double()
    n = log_vol.numel()
    if edge_index.numel() and int(edge_index.max()) >= n:
        raise ValueError(f"edge_index refers to node {int(edge_index.max())} but only {n} volumes were given")
    edge_index = clean_edge_index(edge_index.to(log_vol.device), n)
    row, col = edge_index
    closed = torch.logaddexp(scatter_logsumexp(log_vol[col], row, n), log_vol)
    shell = torch.full_like(log_vol, float("-inf"))
    for u, w in two_hop_shell_pairs(edge_index, n, path_budget):
        # blocks partition the sources, so each block's sums are final: memory stays O(path_budget)
        first = int(u[0]) if u.numel() else 0
        block = scatter_logsumexp(log_vol[w], u - first, int(u[-1]) - first + 1 if u.numel() else 0)
        shell[first : first + block.numel()] = block
    if shell_eps > 0:
        shell = torch.logaddexp(shell, torch.full_like(shell, math.log(shell_eps)))
    return shell - torch.logaddexp(closed, torch.full_like(closed, math.log(eps)))


def ball_log_profile(
    edge_index: Tensor, z: Tensor, p: float, curvature: float = 1.0, eps: float = 1e-8, shell_floor: float = 0.0
) -> Tensor:
    r""":math:`\log\varphi` from ball coordinates: volumes :math:`\lambda_c(z)^p`, and
    ``shell_floor`` origin volumes (:math:`2^p` each) added to every shell."""
    return log_isoperimetric_profile(edge_index, log_volume(z, p, curvature), eps, shell_eps=shell_floor * origin_volume(p))


def isoperimetric_keep_mask(edge_index: Tensor, log_phi: Tensor, beta: float) -> Tensor:
    r"""Keep edge ``(u, v)`` iff :math:`\min(\varphi_u,\varphi_v)/\max(\varphi_u,\varphi_v) \ge \beta`,
    i.e. :math:`|\log\varphi_u - \log\varphi_v| \le -\log\beta`; two zero profiles count as equal."""
    check_beta(beta)
    a, b = log_phi[edge_index[0]], log_phi[edge_index[1]]
    return (a == b) | ((a - b).abs() <= -math.log(beta))


def check_beta(beta: float) -> None:
    if not (0.0 < beta <= 1.0) or math.isnan(beta):
        raise ValueError(f"beta must lie in (0, 1], got {beta}")
