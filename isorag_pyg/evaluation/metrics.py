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
    preds, target, query = _ranked_targets(indices, gold)
    out = {}
    for k in ks:
        out[f"recall@{k}"] = float(RetrievalRecall(top_k=k)(preds, target, indexes=query))
        out[f"precision@{k}"] = float(RetrievalPrecision(top_k=k, adaptive_k=False)(preds, target, indexes=query))
    return out


def per_question_recall(indices: Tensor, gold: list[set[int]], k: int) -> Tensor:
    """``recall@k`` of every question with at least one gold passage, in question order (their
    mean is :func:`retrieval_metrics`' ``recall@k``).

    Example:
        >>> per_question_recall(torch.tensor([[3, 1], [4, 5]]), [{1, 7}, {4}], k=2)
        tensor([0.5000, 1.0000])
    """
    preds, target, query = _ranked_targets(indices, gold)
    return RetrievalRecall(top_k=k, aggregation=lambda values, dim: values)(preds, target, indexes=query)


def _ranked_targets(indices: Tensor, gold: list[set[int]]) -> tuple[Tensor, Tensor, Tensor]:
    """torchmetrics' flat (scores, relevance, query) triple; a gold passage that was not retrieved
    is ranked below everything, so recall counts it as missed."""
    preds, target, query = [], [], []
    depth = indices.size(1)
    for q, (row, relevant) in enumerate(zip(indices.tolist(), gold)):
        if not relevant:
            continue
        preds.extend(float(depth - r) for r in range(len(row)))
        target.extend(i in relevant for i in row)
        missing = relevant - set(row)
        preds.extend([-1.0] * len(missing))
        target.extend([True] * len(missing))
        query.extend([q] * (len(row) + len(missing)))
    if not query:
        raise ValueError("no question has a gold passage: nothing to score")
    return torch.tensor(preds), torch.tensor(target), torch.tensor(query)
