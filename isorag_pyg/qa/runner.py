"""Score a generator on questions with their retrieved passages: EM, F1 and prompt tokens."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.qa.generators import Generator, OpenAIChatGenerator, TransformersGenerator
from isorag_pyg.qa.metrics import exact_match, token_f1
from isorag_pyg.qa.models import packaged_gemma
from isorag_pyg.qa.prompt import PromptTemplate


def build_generator(cfg: DictConfig, out_dir: Path) -> Generator:
    """The generator that ``cfg`` (a ``conf/qa`` config) names; the one place that reads it.
    ``qa.model_path: null`` (transformers) is the packaged Gemma 3 270M GGUF."""
    stop = list(cfg.stop) if cfg.get("stop") else None
    if cfg.kind == "openai":
        cache = cfg.get("cache_path") or out_dir / "qa_answers.jsonl"
        return OpenAIChatGenerator(cfg.base_url, cfg.model, cfg.api_key_env, cfg.concurrency, cfg.max_retries, cfg.timeout,
                                   cfg.backoff, cfg.temperature, cfg.max_tokens, cache, stop)
    if cfg.kind == "transformers":
        model_path = cfg.get("model_path") or packaged_gemma()
        return TransformersGenerator(model_path, cfg.max_tokens, cfg.get("device"), cfg.get("batch_size", 8), stop)
    raise ValueError(f"unknown qa.kind {cfg.kind!r}; choose openai or transformers")


def answer_questions(
    generator: Generator, template: PromptTemplate, questions: list[Question], passages: list[list[Passage]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ask every question with its passages; returns metrics and one record per question."""
    records = generator.generate([template.request(q.text, p) for q, p in zip(questions, passages)])
    rows = []
    for q, record in zip(questions, records):
        rows.append({"id": q.id, "answer": record["answer"], "gold": q.answers, "em": exact_match(record["answer"], q.answers),
                     "f1": token_f1(record["answer"], q.answers), "prompt_tokens": record.get("prompt_tokens")})
    counted = [r["prompt_tokens"] for r in rows if r["prompt_tokens"] is not None]
    metrics = {
        "em": sum(r["em"] for r in rows) / len(rows),
        "f1": sum(r["f1"] for r in rows) / len(rows),
        "avg_prompt_tokens": sum(counted) / len(counted) if counted else None,
        "prompt_token_counter": generator.token_counter,
        "qa_questions": len(rows),
    }
    return metrics, rows
