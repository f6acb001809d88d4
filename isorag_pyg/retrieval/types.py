"""What retrievers take and return."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor


@dataclass
class Queries:
    """A batch of queries: texts (for lexical retrievers) and unit-norm embeddings."""

    texts: list[str]
    embeddings: Tensor  # [Q, d], L2-normalised

    def __post_init__(self) -> None:
        if self.embeddings.dim() != 2 or self.embeddings.size(0) != len(self.texts):
            raise ValueError(f"need one embedding row per query text, got {tuple(self.embeddings.shape)} for {len(self.texts)} texts")

    def __len__(self) -> int:
        return len(self.texts)

    def slice(self, start: int, stop: int) -> "Queries":
        return Queries(self.texts[start:stop], self.embeddings[start:stop])


@dataclass
class RetrievalResult:
    """Top-k corpus rows and scores per query; ``traces`` only when asked for."""

    indices: Tensor  # [Q, k] corpus rows, best first
    scores: Tensor  # [Q, k]
    stats: dict[str, float] = field(default_factory=dict)
    traces: list[dict[str, Any]] | None = None

    @staticmethod
    def concat(parts: list["RetrievalResult"]) -> "RetrievalResult":
        stats: dict[str, float] = {}
        for part in parts:
            for key, value in part.stats.items():
                stats[key] = stats.get(key, 0.0) + value
        traces = None if any(p.traces is None for p in parts) else [t for p in parts for t in p.traces]
        return RetrievalResult(torch.cat([p.indices for p in parts]), torch.cat([p.scores for p in parts]), stats, traces)


class Retriever(Protocol):
    name: str

    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult: ...
