"""Compressed-sparse-row helpers shared by φ and the retriever."""
from __future__ import annotations

import torch
from torch import Tensor


def rowptr_from_sorted_rows(row: Tensor, num_nodes: int) -> Tensor:
    """``rowptr`` of a CSR whose edges are sorted by source ``row``."""
    counts = torch.bincount(row, minlength=num_nodes)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def neighbor_edges(rowptr: Tensor, nodes: Tensor) -> tuple[Tensor, Tensor]:
    """All out-edges of ``nodes``: position ``i`` into ``nodes`` repeated once per edge, and the
    edge's CSR slot (an index into ``col``), in CSR order.

    Example:
        >>> neighbor_edges(torch.tensor([0, 2, 3, 3]), torch.tensor([2, 0]))
        (tensor([1, 1]), tensor([0, 1]))
    """
    first = rowptr[nodes]
    counts = rowptr[nodes + 1] - first
    total = int(counts.sum())
    position = torch.repeat_interleave(counts, output_size=total)
    # slot of the j-th edge of nodes[i] = first[i] + j = running index - edges before node i + first[i]
    shift = first - (counts.cumsum(0) - counts)
    return position, torch.arange(total, device=nodes.device) + shift[position]


def expand_neighbors(rowptr: Tensor, col: Tensor, nodes: Tensor) -> tuple[Tensor, Tensor]:
    """All ``(i, w)`` with ``w`` a neighbour of ``nodes[i]``: position ``i`` repeated, neighbour ``w``.

    Example:
        >>> rowptr, col = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
        >>> expand_neighbors(rowptr, col, torch.tensor([0, 1, 2]))
        (tensor([0, 0, 1]), tensor([1, 2, 0]))
    """
    position, slot = neighbor_edges(rowptr, nodes)
    return position, col[slot]


def is_coalesced_loop_free(edge_index: Tensor, num_nodes: int) -> bool:
    """Whether ``edge_index`` is sorted by (source, target) without repeats or self-loops: what
    dropping self-loops and coalescing would make of it.

    Example:
        >>> is_coalesced_loop_free(torch.tensor([[0, 1], [1, 0]]), 2), is_coalesced_loop_free(torch.tensor([[1, 0], [0, 1]]), 2)
        (True, False)
    """
    src, dst = edge_index
    keys = src * num_nodes + dst
    return not bool((src == dst).any()) and bool((keys[1:] > keys[:-1]).all())


def is_clean_undirected(edge_index: Tensor, num_nodes: int, edge_weight: Tensor | None = None) -> bool:
    """Whether ``edge_index`` (with ``edge_weight``) is already what symmetrising, dropping
    self-loops and coalescing would make of it: sorted by (source, target) without repeats or
    self-loops, every edge's reverse present, with the same weight. A saved index's graph is
    (the corpus graph is built so), so retrieval skips those steps for it.

    Example:
        >>> is_clean_undirected(torch.tensor([[0, 1], [1, 0]]), 2), is_clean_undirected(torch.tensor([[0], [1]]), 2)
        (True, False)
    """
    if edge_index.numel() == 0:
        return True
    if not is_coalesced_loop_free(edge_index, num_nodes):
        return False
    src, dst = edge_index
    keys = src * num_nodes + dst
    reverse = dst * num_nodes + src
    slot = torch.searchsorted(keys, reverse).clamp_max(keys.numel() - 1)
    return bool((keys[slot] == reverse).all()) and (edge_weight is None or bool((edge_weight[slot] == edge_weight).all()))
