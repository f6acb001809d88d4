"""Near-duplicates in a ranking: the passages a better-ranked one already says (almost) word for word."""
from __future__ import annotations

import torch
from torch import Tensor


def near_duplicates_last(vectors: Tensor, valid: Tensor, threshold: float) -> Tensor:
    """Per row of a ranking (best first), the column order that puts each entry whose cosine
    with a better-ranked *kept* entry reaches ``threshold`` after the kept ones (both groups in
    rank order, invalid entries last): a group of near-duplicates takes one slot at the top.

    Args:
        vectors: ``[Q, T, d]`` unit vectors of the ranked entries.
        valid: ``[Q, T]`` bool, the entries that exist (a ranking padded to ``T``).
        threshold: the cosine from which an entry is a near-duplicate.

    Example:
        >>> v = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])  # entry 1 repeats entry 0
        >>> near_duplicates_last(v, torch.ones(1, 3, dtype=torch.bool), 0.9).tolist()
        [[0, 2, 1]]
    """
    width = vectors.size(1)
    close = (vectors @ vectors.transpose(1, 2)) >= threshold
    kept = valid.clone()
    for t in range(1, width):
        kept[:, t] &= ~(close[:, t, :t] & kept[:, :t]).any(dim=1)
    group = (~kept).long() + (~valid).long()  # 0: kept, 1: a near-duplicate, 2: padding
    return (group * width + torch.arange(width, device=vectors.device)).argsort(dim=1)
