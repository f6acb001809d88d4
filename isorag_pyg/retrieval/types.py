"""What retrievers take and return."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor


def check_questions(questions: Sequence[str]) -> None:
    """``ValueError`` unless ``questions`` is a non-empty list of non-blank, valid Unicode strings."""
    if isinstance(questions, str) or not isinstance(questions, Sequence) or not questions:
        raise ValueError("questions must be a non-empty list of strings")
    for i, question in enumerate(questions):
        if not isinstance(question, str):
            raise ValueError(f"question {i} must be a string, got {type(question).__name__}")  # noqa: TRY004 - bad input is ValueError here
        if not question.strip():
            raise ValueError(f"question {i} is empty")
        if not question.isascii():
            try:
                question.encode()
            except UnicodeEncodeError:
                raise ValueError(f"question {i} is not valid Unicode (a lone surrogate)") from None


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

    def slice(self, start: int, stop: int) -> Queries:
        return Queries(self.texts[start:stop], self.embeddings[start:stop])


@dataclass
class RetrievalResult:
    """Top-k corpus rows and scores per query; ``traces`` only when asked for."""

    indices: Tensor  # [Q, k] corpus rows, best first
    scores: Tensor  # [Q, k]
    stats: dict[str, float] = field(default_factory=dict)
    traces: list[dict[str, Any]] | None = None

    @staticmethod
    def ranked(indices: Tensor, scores: Tensor, stats: dict[str, float], trace: bool) -> RetrievalResult:
        """A result whose trace (when asked for) is just the ranked list."""
        traces = [{"top": list(zip(ix, sc))} for ix, sc in zip(indices.tolist(), scores.tolist())] if trace else None
        return RetrievalResult(indices.cpu(), scores.cpu(), stats, traces)

    @staticmethod
    def concat(parts: list[RetrievalResult]) -> RetrievalResult:
        stats: dict[str, float] = {}
        for part in parts:
            for key, value in part.stats.items():
                # counts add up over chunks; "*_max" statistics take the largest
                merge = max if key.endswith("_max") else (lambda a, b: a + b)
                stats[key] = merge(stats[key], value) if key in stats else value
        traces = None if any(p.traces is None for p in parts) else [t for p in parts for t in p.traces]
        return RetrievalResult(torch.cat([p.indices for p in parts]), torch.cat([p.scores for p in parts]), stats, traces)


def check_k(k: int, num_passages: int) -> int:
    """``k`` clipped to the corpus; ``k < 1`` is an error."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return min(k, num_passages)


def retrieve_in_chunks(queries: Queries, chunk: int, run: Callable[[Queries], RetrievalResult]) -> RetrievalResult:
    """``run`` on consecutive slices of at most ``chunk`` queries, results concatenated."""
    if len(queries) == 0:
        raise ValueError("retrieve() needs at least one query")
    return RetrievalResult.concat([run(queries.slice(i, i + chunk)) for i in range(0, len(queries), chunk)])


class Retriever(Protocol):
    name: str

    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult: ...
