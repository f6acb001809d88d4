r"""How much each node makes its neighbours' isoperimetric profiles: the leave-one-out view of
:math:`\varphi` that sees a node built to bridge unrelated regions.

The 2-hop shell :math:`\partial S_u` of :mod:`~isorag_pyg.utils.isoperimetric` is reached through
``u``'s neighbours; the part that a neighbour ``x`` alone reaches would vanish without ``x``, and
``x`` would leave the closed set :math:`S_u`. The change of ``u``'s profile that ``x`` makes is

.. math::
    \delta(u, x) = \log\varphi_u - \log\varphi_u^{\setminus x}, \qquad
    \varphi_u^{\setminus x} = \frac{V(\partial S_u) - V(\partial S_u \text{ reached only through } x) + \mathrm{floor}}
                                  {V(S_u) - v(x) + \epsilon},

with the volumes, shell floor and :math:`\epsilon` of :math:`\varphi`'s recipe. A node's
**bridging score** is the mean :math:`\delta(u, x)` over its neighbours ``u``: how much it inflates
the profiles around it. A passage written to tie the entities of many unrelated questions to one
another is, by construction, their only bridge and inflates each of their profiles; an
encyclopedic passage shares its neighbours' regions with other passages.

Like :math:`\varphi`, every quantity is a scatter over 2-paths, enumerated in blocks of sources
whose 2-paths fit a budget (peak memory stays bounded; cost is linear in the number of 2-paths).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from isorag_pyg.knobs import PhiSpec
from isorag_pyg.utils.csr import expand_neighbors, rowptr_from_sorted_rows
from isorag_pyg.utils.isoperimetric import DEFAULT_PATH_BUDGET, clean_edge_index, log_volumes_of, origin_volume


def profile_change(edge_index: Tensor, log_vol: Tensor, eps: float = PhiSpec.eps, shell_floor: float = PhiSpec.shell_floor,
                   floor_unit: float = 1.0, path_budget: int = DEFAULT_PATH_BUDGET) -> tuple[Tensor, Tensor]:
    r"""``(edges, delta)``: the clean edge list (:func:`~isorag_pyg.utils.isoperimetric.clean_edge_index`,
    CSR order) and :math:`\delta(u, x)` for each of its edges ``u -> x``.

    Args:
        edge_index: ``[2, E]`` edges (pass both directions for the symmetric graph).
        log_vol: ``[N]`` log-volumes, as for :math:`\varphi` (zeros: node counts).
        eps, shell_floor, floor_unit: :math:`\varphi`'s :math:`\epsilon`, shell floor and the floor's unit volume.
        path_budget: 2-paths expanded per block.

    Example:
        >>> ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0 - 1 - 2: 1 alone reaches 2 from 0, and 1 has no shell
        >>> edges, delta = profile_change(ei, torch.zeros(3), shell_floor=1.0)
        >>> edges.tolist(), [round(d, 3) for d in delta.tolist()]
        ([[0, 1, 1, 2], [1, 0, 2, 1]], [0.0, -0.405, -0.405, 0.0])
    """
    n = log_vol.numel()
    edges = clean_edge_index(edge_index.to(log_vol.device), n)
    row, col = edges
    rowptr = rowptr_from_sorted_rows(row, n)
    scale = float(log_vol.max()) if n else 0.0
    vol = (log_vol.double() - scale).exp()  # volumes up to a common factor (the floor and ε scaled alike)
    unit = math.exp(-scale)
    lost = torch.zeros(row.numel(), dtype=torch.float64, device=row.device)
    shell = torch.zeros(n, dtype=torch.float64, device=row.device)
    paths = (rowptr[col + 1] - rowptr[col]).cumsum(0)  # 2-paths up to and including each edge
    start = 0
    while start < row.numel():
        # whole rows per block, so that every 2-path of a block's sources is in that block
        stop = int(torch.searchsorted(paths, (paths[start - 1] if start else 0) + path_budget, right=True))
        stop = int(rowptr[int(row[min(max(stop, start + 1), row.numel()) - 1]) + 1])
        _block(start, stop, row, col, rowptr, vol, lost, shell)
        start = stop
    closed = vol + torch.zeros_like(vol).index_add_(0, row, vol[col])
    floor, epsilon = shell_floor * floor_unit * unit, eps * unit
    with_x = torch.log(shell[row] + floor) - torch.log(closed[row] + epsilon)
    without_x = torch.log((shell[row] - lost).clamp_min(0) + floor) - torch.log(closed[row] - vol[col] + epsilon)
    return edges, with_x - without_x


def _block(start: int, stop: int, row: Tensor, col: Tensor, rowptr: Tensor, vol: Tensor, lost: Tensor, shell: Tensor) -> None:
    """Adds the block of edges ``start:stop`` (whole rows) to ``lost`` (the shell volume each edge
    alone reaches) and ``shell`` (each source's shell volume)."""
    n = vol.numel()
    position, far = expand_neighbors(rowptr, col, col[start:stop])
    edge = position + start  # the edge u -> x that each 2-path u -> x -> w takes
    u = row[edge]
    key = u * n + far
    one_hop = row * n + col  # sorted: CSR order
    slot = torch.searchsorted(one_hop, key).clamp_max(one_hop.numel() - 1)
    in_shell = (u != far) & (one_hop[slot] != key)
    edge, key, far = edge[in_shell], key[in_shell], far[in_shell]
    distinct, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
    shell.index_add_(0, distinct // n, vol[distinct % n])
    alone = counts[inverse] == 1  # w reached through this one neighbour only
    lost.index_add_(0, edge[alone], vol[far[alone]])


def bridging_score(edge_index: Tensor, log_vol: Tensor, eps: float = PhiSpec.eps, shell_floor: float = PhiSpec.shell_floor,
                   floor_unit: float = 1.0, path_budget: int = DEFAULT_PATH_BUDGET) -> Tensor:
    r"""``[N]`` the mean :math:`\delta(u, x)` over the neighbours ``u`` of every node ``x`` (``-inf``
    without neighbours): how much it inflates the isoperimetric profiles around it.

    Example:
        >>> star = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])  # 0 is the only bridge between 1, 2, 3
        >>> [round(b, 3) for b in bridging_score(star, torch.zeros(4), shell_floor=1.0).tolist()]
        [0.405, -0.288, -0.288, -0.288]
    """
    from torch_geometric.utils import scatter  # here, not with the module: opening an index imports no PyG

    edges, delta = profile_change(edge_index, log_vol, eps, shell_floor, floor_unit, path_budget)
    score = scatter(delta, edges[1], dim=0, dim_size=log_vol.numel(), reduce="mean")
    linked = torch.zeros_like(score, dtype=torch.bool).index_fill_(0, edges[1], True)
    return score.masked_fill(~linked, float("-inf"))  # a node without neighbours bridges nothing


def bridging_from_ball(edge_index: Tensor, z: Tensor | None, spec: PhiSpec = PhiSpec(), num_nodes: int | None = None) -> Tensor:
    """Every node's :func:`bridging_score` under ``spec``, as :func:`~isorag_pyg.utils.isoperimetric.log_phi_from_ball`
    computes φ: volumes from the ball coordinates ``z`` (``None`` with ``p = 0``: pass ``num_nodes``)."""
    log_vol = log_volumes_of(z, spec, num_nodes, edge_index.device)
    return bridging_score(edge_index, log_vol, spec.eps, spec.shell_floor, origin_volume(spec.p))


def bridge_mask(scores: Tensor, share: float, num_passages: int) -> Tensor:
    """``[N]`` bool: the passages (rows ``< num_passages``) whose score is above the ``1 - share``
    quantile of the passages' scores, i.e. about the ``share`` of them with the highest scores
    (none where the scores are all equal, none with ``share = 0``).

    Example:
        >>> bridge_mask(torch.tensor([0.1, 0.9, 0.2, 0.3, 5.0]), 0.25, num_passages=4).tolist()
        [False, True, False, False, False]
    """
    if not 0.0 <= share < 1.0:
        raise ValueError(f"share must lie in [0, 1), got {share}")
    mask = torch.zeros(scores.numel(), dtype=torch.bool, device=scores.device)
    if share > 0 and num_passages:
        passages = scores[:num_passages].double()
        below = passages.kthvalue(max(1, round((1.0 - share) * num_passages))).values  # torch.quantile caps its input's size
        mask[:num_passages] = passages > below
    return mask
