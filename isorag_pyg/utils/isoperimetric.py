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

PyG's scatter and coalesce are imported by the functions that compute φ, not with the module: the
filter's decision (:func:`isoperimetric_keep_mask`, :func:`ablate_log_phi`) runs on every query,
and a query does not import torch_geometric.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import Tensor

from isorag_pyg.knobs import PHI_MODES, PhiSpec, check_beta
from isorag_pyg.utils.csr import expand_neighbors, is_coalesced_loop_free, rowptr_from_sorted_rows

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
    from torch_geometric.utils import scatter

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
    """Drop self-loops and duplicates, sort by source (CSR order). An edge list that is already so
    (a saved index's graph) is returned as it is, without importing PyG."""
    if is_coalesced_loop_free(edge_index, num_nodes):
        return edge_index
    from torch_geometric.utils import coalesce, remove_self_loops

    edge_index, _ = remove_self_loops(edge_index)
    return coalesce(edge_index, num_nodes=num_nodes)


def two_hop_shell_pairs(
    edge_index: Tensor, num_nodes: int, path_budget: int = DEFAULT_PATH_BUDGET, sources: Tensor | None = None
) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield ``(u, w)`` chunks of distinct pairs with ``w`` at distance exactly 2 from ``u``
    (for every ``u``, or only those in ``sources``).

    ``edge_index`` must be clean (:func:`clean_edge_index`). Sources are processed in blocks
    whose 2-paths fit in ``path_budget``; cost is linear in the number of 2-paths.
    """
    row, col = edge_index
    rowptr = rowptr_from_sorted_rows(row, num_nodes)
    deg = rowptr[1:] - rowptr[:-1]
    paths_per_node = deg.new_zeros(num_nodes).scatter_add_(0, row, deg[col])  # PyG's scatter(reduce="sum")
    is_source = None
    if sources is not None:
        is_source = torch.zeros(num_nodes, dtype=torch.bool, device=row.device)
        is_source[sources] = True
        paths_per_node = paths_per_node * is_source
    ends = paths_per_node.cumsum(0)
    start = 0
    while start < num_nodes:
        base = ends[start - 1] if start > 0 else ends.new_zeros(())
        stop = int(torch.searchsorted(ends, base + path_budget, right=True))
        stop = max(stop, start + 1)
        e0, e1 = int(rowptr[start]), int(rowptr[stop])
        src, mid = row[e0:e1], col[e0:e1]
        if is_source is not None:  # whole rows are kept, so the 1-hop test below stays exact
            src, mid = src[is_source[src]], mid[is_source[src]]
        if src.numel():
            yield _shell_block(src, mid, rowptr, col, num_nodes)
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
    eps: float = PhiSpec.eps,
    shell_floor: float = PhiSpec.shell_floor,
    floor_unit: float = 1.0,
    path_budget: int = DEFAULT_PATH_BUDGET,
    nodes: Tensor | None = None,
) -> Tensor:
    r"""Return :math:`\log\varphi_u` for every node, or for ``nodes`` only, in their order
    (``-inf`` where the 2-hop shell is empty and there is no floor).

    Args:
        edge_index: ``[2, E]`` edges; self-loops and duplicates are ignored.
        log_vol: ``[N]`` per-node log-volumes, e.g. from :func:`log_volume`.
        eps: the :math:`\epsilon` added to :math:`V(S_u)`. (default: ``1e-8``)
        shell_floor: ``shell_floor * floor_unit`` is added to :math:`V(\partial S_u)` (see
            :class:`PhiSpec`); ``0`` is the plain definition. (default: ``8.0``)
        floor_unit: the volume one unit of floor stands for; :func:`log_phi_from_ball` passes
            the origin volume :math:`2^p`. (default: ``1.0``, the volume of a node when ``p = 0``)
        path_budget: 2-paths expanded per block. (default: ``2**24``)
        nodes: compute only these nodes' values (an index update recomputes φ only where
            the graph changed around a node). (default: every node)

    Example:
        >>> import torch
        >>> ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0 - 1 - 2
        >>> log_isoperimetric_profile(ei, torch.zeros(3), shell_floor=0.0).exp()
        tensor([0.5000, 0.0000, 0.5000], dtype=torch.float64)
    """
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if shell_floor < 0 or floor_unit <= 0:
        raise ValueError(f"shell_floor must be >= 0 and floor_unit > 0, got {shell_floor} and {floor_unit}")
    log_vol = log_vol.double()
    n = log_vol.numel()
    if edge_index.numel() and int(edge_index.max()) >= n:
        raise ValueError(f"edge_index refers to node {int(edge_index.max())} but only {n} volumes were given")
    edge_index = clean_edge_index(edge_index.to(log_vol.device), n)
    row, col = edge_index
    closed = torch.logaddexp(scatter_logsumexp(log_vol[col], row, n), log_vol)
    shell = torch.full_like(log_vol, float("-inf"))
    for u, w in two_hop_shell_pairs(edge_index, n, path_budget, nodes):
        # blocks partition the sources, so each block's sums are final: memory stays O(path_budget)
        first = int(u[0]) if u.numel() else 0
        block = scatter_logsumexp(log_vol[w], u - first, int(u[-1]) - first + 1 if u.numel() else 0)
        shell[first : first + block.numel()] = block
    if nodes is not None:
        shell, closed = shell[nodes], closed[nodes]
    if shell_floor > 0:
        shell = torch.logaddexp(shell, torch.full_like(shell, math.log(shell_floor * floor_unit)))
    return shell - torch.logaddexp(closed, torch.full_like(closed, math.log(eps)))


def log_phi_from_ball(
    edge_index: Tensor, z: Tensor | None, spec: PhiSpec = PhiSpec(), num_nodes: int | None = None, nodes: Tensor | None = None
) -> Tensor:
    r""":math:`\log\varphi` of every node (or of ``nodes`` only) under ``spec``: volumes
    :math:`\lambda_c(z)^p` and ``spec.shell_floor`` origin volumes (:math:`2^p` each) added to
    every shell. With ``spec.p == 0`` the coordinates are not needed: pass ``z=None`` and
    ``num_nodes``.

    Example:
        >>> ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
        >>> log_phi_from_ball(ei, None, PhiSpec(p=0.0, shell_floor=0.0), num_nodes=3).exp()
        tensor([0.5000, 0.0000, 0.5000], dtype=torch.float64)
    """
    log_vol = log_volumes_of(z, spec, num_nodes, edge_index.device)
    return log_isoperimetric_profile(edge_index, log_vol, spec.eps, spec.shell_floor, origin_volume(spec.p), nodes=nodes)


def log_volumes_of(z: Tensor | None, spec: PhiSpec, num_nodes: int | None, device: torch.device | str = "cpu") -> Tensor:
    """Every node's log-volume under ``spec``: from ball coordinates ``z``, or zeros (``p = 0``,
    ``z=None``: pass ``num_nodes``)."""
    if z is None:
        if spec.needs_coordinates:
            raise ValueError(f"φ with p = {spec.p} needs ball coordinates (train f_θ), or use p = 0")
        if num_nodes is None:
            raise ValueError("without ball coordinates, pass num_nodes")
        return torch.zeros(num_nodes, dtype=torch.float64, device=device)
    if num_nodes is not None and z.size(0) != num_nodes:
        raise ValueError(f"ball coordinates have {z.size(0)} rows for {num_nodes} nodes")
    return log_volume(z, spec.p, spec.curvature)


def ablate_log_phi(log_phi: Tensor, mode: str = "real", seed: int = 0) -> Tensor:
    r""":math:`\log\varphi` after an ablation (see :data:`PHI_MODES`); ``shuffled`` and
    ``random`` are seeded by ``seed``.

    Example:
        >>> ablate_log_phi(torch.tensor([-1.0, -2.0]), "uniform")
        tensor([0., 0.], dtype=torch.float64)
    """
    if mode not in PHI_MODES:
        raise ValueError(f"phi mode must be one of {PHI_MODES}, got {mode!r}")
    n, device = log_phi.numel(), log_phi.device
    if mode == "real":
        return log_phi.double()
    if mode == "uniform":
        return torch.zeros(n, dtype=torch.float64, device=device)
    generator = torch.Generator().manual_seed(seed)
    if mode == "random":
        return torch.rand(n, generator=generator, dtype=torch.float64).clamp_min(1e-12).log().to(device)
    return log_phi.double()[torch.randperm(n, generator=generator).to(device)]


def isoperimetric_keep_mask(edge_index: Tensor, log_phi: Tensor, beta: float) -> Tensor:
    r"""Keep edge ``(u, v)`` iff :math:`\min(\varphi_u,\varphi_v)/\max(\varphi_u,\varphi_v) \ge \beta`,
    i.e. :math:`|\log\varphi_u - \log\varphi_v| \le -\log\beta`; two zero profiles count as equal."""
    check_beta(beta)
    a, b = log_phi[edge_index[0]], log_phi[edge_index[1]]
    return (a == b) | ((a - b).abs() <= -math.log(beta))
