"""The library's evaluation entry, plain arguments only: an index, questions with gold passages
and an encoder in; encoded questions, gold rows and retrievers by name out. The ``evaluate`` app
and the benchmarks both start here (their configs only choose the arguments)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from isorag_pyg.datasets import QADataset
from isorag_pyg.encoders import TextEncoder
from isorag_pyg.index.index import ISORAGIndex
from isorag_pyg.retrieval.types import Queries, Retriever


@dataclass
class EvaluationInputs:
    """Everything retrievers are scored on: the questions, their index, encoded queries, gold rows."""

    dataset: QADataset
    index: ISORAGIndex
    queries: Queries
    gold: list[set[int]]
    encode_ms_per_query: float

    def retriever(self, name: str, device: str | torch.device = "auto", **knobs: Any) -> Retriever:
        """The index's retriever ``name`` with these knobs (:meth:`ISORAGIndex.retriever`)."""
        return self.index.retriever(name, device=device, **knobs)


def evaluation_inputs(index: ISORAGIndex, dataset: QADataset, encoder: TextEncoder) -> EvaluationInputs:
    """``dataset``'s questions encoded with ``encoder`` (timed) and their gold passages as rows of ``index``."""
    gold = [{index.passages.row_of(g) for g in q.gold_ids} for q in dataset.questions]
    texts = [q.text for q in dataset.questions]
    start = time.perf_counter()
    queries = Queries(texts, encoder.encode(texts))
    encode_ms = 1000.0 * (time.perf_counter() - start) / len(texts)
    return EvaluationInputs(dataset, index, queries, gold, encode_ms)
