"""Two rankings of the same corpus fused into one: a hybrid of a graph walk and a lexical score."""
from __future__ import annotations

import torch
from torch import Tensor


def minmax_union(first: tuple[Tensor, Tensor], second: tuple[Tensor, Tensor], weight: float,
                 num_rows: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per query, the union of two rankings scored ``minmax(first) + weight * minmax(second)``
    (each min-max scaled over that query's entries; an entry a ranking lacks scores 0 in it; a
    ranking whose entries tie scales them to 1).

    Args:
        first, second: ``(rows, scores)``, each ``[Q, *]``: corpus rows (``-1``: padding) and their
            scores (non-finite: padding).
        weight: the second ranking's weight (the first's is 1).
        num_rows: the corpus rows (every row is below it).

    Returns:
        ``(row, score, batch, ptr)``: the union flat, grouped by query (``batch``, boundaries
        ``ptr``, ``[Q + 1]``), each query's rows ascending.

    Example:
        >>> walk = (torch.tensor([[3, 1]]), torch.tensor([0.9, 0.1]).unsqueeze(0))
        >>> lexical = (torch.tensor([[1, 2]]), torch.tensor([5.0, 4.0]).unsqueeze(0))
        >>> row, score, batch, ptr = minmax_union(walk, lexical, 0.5, num_rows=4)
        >>> row.tolist(), score.tolist(), ptr.tolist()
        ([1, 2, 3], [0.5, 0.0, 1.0], [0, 3])
    """
    num_queries = first[0].size(0)
    queries, rows, scores = [], [], []
    for (row, score), share in ((first, 1.0), (second, weight)):
        valid = (row >= 0) & torch.isfinite(score)
        low = torch.where(valid, score, torch.inf).amin(dim=1, keepdim=True)
        span = torch.where(valid, score, -torch.inf).amax(dim=1, keepdim=True) - low
        scaled = torch.where(span > 0, (score - low) / span, torch.ones_like(score))
        queries.append(torch.arange(num_queries, device=row.device).unsqueeze(1).expand_as(row)[valid])
        rows.append(row[valid])
        scores.append(share * scaled[valid])
    key, slot = torch.unique(torch.cat(queries) * num_rows + torch.cat(rows), return_inverse=True)
    fused = torch.zeros(key.numel(), dtype=scores[0].dtype, device=key.device).index_add_(0, slot, torch.cat(scores))
    batch = key // num_rows
    ptr = torch.cat([batch.new_zeros(1), torch.bincount(batch, minlength=num_queries).cumsum(0)])
    return key % num_rows, fused, batch, ptr
