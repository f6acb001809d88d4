"""Tune ISO-RAG's knobs for one corpus on questions with known gold passages, held out.

Every grid setting is scored by per-question Recall@k. The chosen setting is the best mean over
all the questions, and what that choice is worth on questions it was not chosen on is estimated
by repeated k-fold cross-validation of the same selection
(:func:`~isorag_pyg.evaluation.cross_validated_selection`). The knobs are stored in the index
only when that held-out estimate beats the current knobs on the same questions (which were not
chosen on them): otherwise tuning would only fit noise.
"""
from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from isorag_pyg import defaults
from isorag_pyg.datasets import DatasetFormatError, load_qa_dataset
from isorag_pyg.datasets.formats import read_records
from isorag_pyg.evaluation.metrics import per_question_recall
from isorag_pyg.evaluation.selection import cross_validated_selection

if TYPE_CHECKING:
    from isorag_pyg.index.index import ISORAGIndex



@dataclass
class TuningResult:
    """The chosen knobs and what they are worth (mean Recall@k over the questions)."""

    best: dict[str, Any]
    in_sample: float
    held_out: float
    current: float
    questions: int
    stored: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        knobs = " ".join(f"{k}={v}" for k, v in self.best.items())
        wins = self.held_out > self.current
        verdict = "stored" if self.stored else ("better held out, not stored (dry run)" if wins else "not stored: no better than the current knobs held out")
        return (f"{self.questions} questions: current knobs {self.current:.4f}; best setting {knobs} {self.in_sample:.4f} in-sample, "
                f"{self.held_out:.4f} cross-validated held out -> {verdict}")


def read_questions(path: str | Path, index: ISORAGIndex) -> tuple[list[str], list[set[int]]]:
    """Questions and their gold passages (rows of ``index``) from a JSON / JSON-lines file of
    ``{"question", "gold_ids": [passage ids]}`` records, or any dataset question file (gold
    passages matched to the index by title and text, as the dataset loaders do)."""
    path = Path(path)
    records = read_records(path)
    if isinstance(records, list) and records and isinstance(records[0], dict) and "gold_ids" in records[0]:
        texts, gold = [], []
        for i, record in enumerate(records):
            if not isinstance(record, dict) or not isinstance(record.get("question"), str) or not isinstance(record.get("gold_ids"), list):
                raise DatasetFormatError(path, "expected {\"question\": str, \"gold_ids\": [ids]}", record=i)
            rows = {index.passages.row_of(str(g)) for g in record["gold_ids"]}
            if None in rows:
                missing = [g for g in record["gold_ids"] if index.passages.row_of(str(g)) is None]
                raise DatasetFormatError(path, f"gold id {missing[0]!r} is not a passage of the index", record=i, field="gold_ids")
            texts.append(record["question"])
            gold.append(rows)
    else:
        dataset = load_qa_dataset(path, corpus=list(index.passages))
        texts = [q.text for q in dataset.questions]
        gold = [{index.passages.row_of(g) for g in q.gold_ids} for q in dataset.questions]
    kept = [(t, g) for t, g in zip(texts, gold) if g]
    if len(kept) < 4:
        raise ValueError(f"{path}: {len(kept)} question(s) with gold passages in the index; tuning needs at least 4")
    return [t for t, _ in kept], [g for _, g in kept]


def grid_settings(grid: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def tune(index: ISORAGIndex, questions: list[str], gold: list[set[int]], grid: Mapping[str, list[Any]] = defaults.TUNE_GRID,
         k: int = defaults.K, folds: int = defaults.TUNE_FOLDS, repeats: int = defaults.TUNE_REPEATS, seed: int = 0,
         store: bool = True) -> TuningResult:
    """Search ``grid`` for ISO-RAG (the other knobs as they are now), then store the best setting
    in the index when its cross-validated Recall@``k`` beats the current knobs'."""
    if not grid or any(not values for values in grid.values()):
        raise ValueError("the grid needs at least one value per knob")
    queries = index.encode_questions(questions)
    depth = max(k, 10)

    def recall(**knobs: Any) -> torch.Tensor:
        return per_question_recall(index.retriever("iso", **knobs).retrieve(queries, depth).indices, gold, k)

    current = recall()
    settings = grid_settings(grid)
    scores = [recall(**setting) for setting in settings]
    selection = cross_validated_selection(dict(enumerate(scores)), folds=folds, repeats=repeats, seed=seed)
    best = int(torch.stack([s.mean() for s in scores]).argmax())
    result = TuningResult(settings[best], float(scores[best].mean()), selection["held_out"], float(current.mean()), len(questions),
                          rows=[{**s, f"recall@{k}": float(r.mean())} for s, r in zip(settings, scores)])
    if store and result.held_out > result.current:
        index.set_knobs("iso", {**index.knobs.get("iso", {}), **settings[best]})
        result.stored = True
    return result


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """``["beta=0.05,0.1", "hops=1,2"]`` -> ``{"beta": [0.05, 0.1], "hops": [1, 2]}`` (JSON values)."""
    grid = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"a grid entry is KNOB=V1,V2,..., got {item!r}")
        grid[key] = [_value(v) for v in values.split(",")]
    return grid


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # e.g. phi_mode=real
