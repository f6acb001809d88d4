"""Compressed-sparse-row helpers shared by φ and the retriever."""
from __future__ import annotations

import torch
from torch import Tensor


def rowptr_from_sorted_rows(row: Tensor, num_nodes: int) -> Tensor:
    """``rowptr`` of a CSR whose edges are sorted by source ``row``."""
    counts = torch.bincount(row, minlength=num_nodes)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def expand_neighbors(rowptr: Tensor, col: Tensor, nodes: Tensor) -> tuple[Tensor, Tensor]:
    """All ``(i, w)`` with ``w`` a neighbour of ``nodes[i]``: position ``i`` repeated, neighbour ``w``.

    Example:
        >>> rowptr, col = torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0])
        >>> expand_neighbors(rowptr, col, torch.tensor([0, 1, 2]))
        (tensor([0, 0, 1]), tensor([1, 2, 0]))
    """
    counts = rowptr[nodes + 1] - rowptr[nodes]
    total = int(counts.sum())
    position = torch.arange(nodes.numel(), device=nodes.device).repeat_interleave(counts)
    if total == 0:
        return position, col.new_empty(0)
    offset = torch.arange(total, device=nodes.device) - (counts.cumsum(0) - counts).repeat_interleave(counts)
    return position, col[rowptr[nodes].repeat_interleave(counts) + offset]
