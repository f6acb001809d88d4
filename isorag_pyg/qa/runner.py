"""Score a generator on questions with their retrieved passages: EM, F1 and prompt tokens (the
answer scored without its citation markers, as the product's answers are)."""
from __future__ import annotations

from typing import Any

from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.qa.citations import without_markers
from isorag_pyg.qa.generators import Generator
from isorag_pyg.qa.metrics import exact_match, token_f1
from isorag_pyg.qa.prompt import PromptTemplate


def answer_questions(
    generator: Generator, template: PromptTemplate, questions: list[Question], passages: list[list[Passage]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ask every question with its passages; returns metrics and one record per question."""
    records = generator.generate([template.request(q.text, p) for q, p in zip(questions, passages)])
    rows = []
    for q, record in zip(questions, records):
        answer = without_markers(record["answer"])
        rows.append({"id": q.id, "answer": record["answer"], "gold": q.answers, "em": exact_match(answer, q.answers),
                     "f1": token_f1(answer, q.answers), "prompt_tokens": record.get("prompt_tokens")})
    counted = [r["prompt_tokens"] for r in rows if r["prompt_tokens"] is not None]
    metrics = {
        "em": sum(r["em"] for r in rows) / len(rows),
        "f1": sum(r["f1"] for r in rows) / len(rows),
        "avg_prompt_tokens": sum(counted) / len(counted) if counted else None,
        "prompt_token_counter": generator.token_counter,
        "qa_questions": len(rows),
    }
    return metrics, rows
