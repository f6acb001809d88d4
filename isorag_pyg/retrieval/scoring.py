"""Dense scoring in query chunks (never an N x N matrix), per-segment and per-row min-max."""
from __future__ import annotations

import torch
from torch import Tensor

#: Query-by-passage score entries held at once (2**26 floats = 256 MiB).
SCORE_BUDGET = 1 << 26


def query_chunk_size(num_passages: int, requested: int | None = None) -> int:
    """Queries per chunk so that a ``[chunk, N]`` score block fits :data:`SCORE_BUDGET`."""
    fit = max(1, SCORE_BUDGET // max(1, num_passages))
    return min(requested, fit) if requested else min(1024, fit)


def _unit_scale(values: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """``(values - lo) / (hi - lo)``; 0 where ``hi == lo``."""
    span = hi - lo
    return torch.where(span > 0, (values - lo) / span.clamp_min(torch.finfo(values.dtype).tiny), torch.zeros_like(values))


def segment_minmax(values: Tensor, segment: Tensor, ptr: Tensor) -> Tensor:
    """Min-max scale ``values`` (``[M]`` or ``[M, C]``, each column on its own) within each
    contiguous segment (``segment`` sorted, offsets ``ptr``) to [0, 1]; constant segments become 0."""
    lengths = ptr[1:] - ptr[:-1]
    lo = torch.segment_reduce(values, "min", lengths=lengths, axis=0)[segment]
    hi = torch.segment_reduce(values, "max", lengths=lengths, axis=0)[segment]
    return _unit_scale(values, lo, hi)


def row_minmax(values: Tensor) -> Tensor:
    """Min-max scale every row of ``[Q, N]`` ``values`` to [0, 1]; constant rows become 0."""
    return _unit_scale(values, values.min(dim=1, keepdim=True).values, values.max(dim=1, keepdim=True).values)


def segment_topk(values: Tensor, segment: Tensor, ptr: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Top-``k`` positions (into ``values``) and values per segment; segments shorter than
    ``k`` are padded with position ``-1`` and value ``-inf``."""
    num_segments = ptr.numel() - 1
    sizes = ptr[1:] - ptr[:-1]
    width = max(int(sizes.max()) if num_segments else 0, k)
    dense = values.new_full((num_segments, width), float("-inf"))
    slot = torch.arange(values.numel(), device=values.device) - ptr[segment]
    dense[segment, slot] = values
    top_values, top_slots = dense.topk(k, dim=1)
    positions = top_slots + ptr[:-1].unsqueeze(1)
    valid = top_slots < sizes.unsqueeze(1)
    return torch.where(valid, positions, torch.full_like(positions, -1)), top_values
