"""The one loop that scores retrievers side by side on the same encoded questions (the ``evaluate``
app and every benchmark use it)."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.retrieval.types import Queries, RetrievalResult, Retriever

#: ``(retriever, queries, k) -> (result, seconds)``
TimedRetrieval = Callable[[Retriever, Queries, int], "tuple[RetrievalResult, float]"]


def synchronize(device: torch.device | str) -> None:
    """Wait for queued CUDA work so wall-clock timings are honest."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def retriever_device(retriever: Retriever) -> torch.device:
    index = getattr(retriever, "index", None)
    return index.device if index is not None else torch.device("cpu")


def time_retrieval(retriever: Retriever, queries: Queries, k: int) -> tuple[RetrievalResult, float]:
    """One untimed warm-up query, then all ``queries`` in one call: the result and its seconds."""
    device = retriever_device(retriever)
    retriever.retrieve(queries.slice(0, 1), k)
    synchronize(device)
    start = time.perf_counter()
    result = retriever.retrieve(queries, k)
    synchronize(device)
    return result, time.perf_counter() - start


@dataclass
class RetrieverRun:
    """One retriever's rankings and their scores."""

    result: RetrievalResult
    metrics: dict[str, Any]


def evaluate_retrievers(
    retrievers: Mapping[str, Retriever],
    queries: Queries,
    gold: list[set[int]],
    k: int = 10,
    ks: tuple[int, ...] = (5, 10),
    retrieve: TimedRetrieval = time_retrieval,
) -> dict[str, RetrieverRun]:
    """Run every retriever on all ``queries`` and score it against ``gold`` (corpus rows):
    Recall/Precision@``ks``, milliseconds per query (one batched call after a warm-up), and for
    ISO-RAG the share of local edges the filter removed and the candidates per query."""
    runs = {}
    for label, retriever in retrievers.items():
        result, seconds = retrieve(retriever, queries, k)
        metrics: dict[str, Any] = retrieval_metrics(result.indices, gold, tuple(ks))
        metrics["latency_ms_per_query"] = 1000.0 * seconds / len(queries)
        local_edges = result.stats.get("local_edges")
        metrics["removed_edge_fraction"] = result.stats["removed_edges"] / local_edges if local_edges else 0.0
        if "candidates" in result.stats:
            metrics["candidates_per_query"] = result.stats["candidates"] / len(queries)
        runs[label] = RetrieverRun(result, metrics)
    return runs
