"""Retrieval metrics (torchmetrics): Recall@k and Precision@k against gold passages."""
from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics.retrieval import RetrievalPrecision, RetrievalRecall


def retrieval_metrics(indices: Tensor, gold: list[set[int]], ks: tuple[int, ...] = (5, 10)) -> dict[str, float]:
    """``recall@k`` = gold passages in the top k / gold passages; ``precision@k`` = gold in top k / k;
    both averaged over questions with at least one gold passage.

    Example:
        >>> retrieval_metrics(torch.tensor([[3, 1, 2]]), [{1, 7}], ks=(1, 2))
        {'recall@1': 0.0, 'precision@1': 0.0, 'recall@2': 0.5, 'precision@2': 0.5}
    """
    preds, target, query = [], [], []
    depth = indices.size(1)
    for q, (row, relevant) in enumerate(zip(indices.tolist(), gold)):
        if not relevant:
            continue
        preds.extend(float(depth - r) for r in range(len(row)))
        target.extend(i in relevant for i in row)
        missing = relevant - set(row)
        preds.extend([-1.0] * len(missing))  # gold never retrieved: ranked below everything
        target.extend([True] * len(missing))
        query.extend([q] * (len(row) + len(missing)))
    if not query:
        raise ValueError("no question has a gold passage: nothing to score")
    p, t, i = torch.tensor(preds), torch.tensor(target), torch.tensor(query)
    out = {}
    for k in ks:
        out[f"recall@{k}"] = float(RetrievalRecall(top_k=k)(p, t, indexes=i))
        out[f"precision@{k}"] = float(RetrievalPrecision(top_k=k, adaptive_k=False)(p, t, indexes=i))
    return out
