"""``evaluate.py``'s job: retrieval metrics, latency, traces and a case study for one or more retrievers."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from hydra import compose
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.table import Table

from isorag_pyg.evaluation.case_study import plot_case_study
from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.evaluation.sharded import sharded_retrieve
from isorag_pyg.pipeline import CorpusBundle, build_encoder, device_of, prepare_corpus, process_rank
from isorag_pyg.qa.prompt import PromptTemplate
from isorag_pyg.qa.runner import answer_questions, build_generator
from isorag_pyg.retrieval.factory import build_retriever, time_retrieval
from isorag_pyg.retrieval.types import Queries, RetrievalResult
from isorag_pyg.encoders.cache import cache_key, default_cache_dir
from isorag_pyg.training.run import corpus_hash, fit_f_theta, load_ball_embeddings, save_ball_embeddings

log = logging.getLogger(__name__)


def retriever_configs(cfg: DictConfig) -> list[DictConfig]:
    """``cfg.retriever``, or every config named in ``cfg.compare`` (composed like ``retriever=<name>``)."""
    if not cfg.get("compare"):
        return [cfg.retriever]
    return [compose(config_name="eval", overrides=[f"retriever={name}"]).retriever for name in cfg.compare]


def ball_provider(cfg: DictConfig, bundle: CorpusBundle, out_dir: Path):
    """Lazily supplies (z, curvature): from ``cfg.ball_embeddings``, else f_θ trained on this
    graph once and cached (keyed by corpus, graph and training config), so sweeps reuse it."""

    @lru_cache(maxsize=1)
    def ball():
        if cfg.get("ball_embeddings"):
            return load_ball_embeddings(cfg.ball_embeddings, bundle)
        cached = f_theta_cache_path(cfg, bundle)
        if cached is not None and cached.is_file():
            try:
                return load_ball_embeddings(cached, bundle)
            except Exception as err:  # unreadable cache: retrain
                log.warning("discarding unusable f_θ cache %s (%s)", cached, err)
        log.info("no ball_embeddings given: training f_θ on this graph first")
        rank = process_rank()  # extra DDP ranks (sharded evaluation) train in a directory of their own
        fit = fit_f_theta(cfg, bundle, out_dir / ("f_theta" if rank == 0 else f"f_theta_rank{rank}"))
        if cached is not None and rank == 0:
            save_ball_embeddings(cached, fit.z, fit.encoder.curvature, bundle, fit.checkpoint)
        return fit.z, fit.encoder.curvature

    return ball


def f_theta_cache_path(cfg: DictConfig, bundle: CorpusBundle) -> Path | None:
    directory = cfg.encoder.get("cache_dir", "default")
    if directory is None:
        return None
    directory = default_cache_dir() if directory == "default" else Path(directory)
    parts = [corpus_hash(bundle), json.dumps(OmegaConf.to_container(cfg.graph, resolve=True), sort_keys=True)]
    parts += [json.dumps(OmegaConf.to_container(cfg[k], resolve=True), sort_keys=True) for k in ("model", "data", "trainer")]
    parts.append(str(cfg.seed))
    return directory / f"ball-{cache_key('f_theta', parts)[:40]}.pt"


def timed_retrieve(retriever, queries: Queries, k: int, device, sharding: DictConfig | None) -> tuple[RetrievalResult, float]:
    """All queries in one batched call, or sharded over ``sharding.devices`` DDP ranks; returns the
    result and the retrieval seconds (the slowest rank's when sharded)."""
    devices = 1 if sharding is None else int(sharding.devices)
    if devices < 1:
        raise ValueError(f"sharding.devices must be >= 1, got {devices}")
    if devices > 1 and len(queries) < devices:  # a rank would get no question: not worth processes
        log.warning("%d question(s) for %d ranks: retrieving in one process", len(queries), devices)
    elif devices > 1:
        return sharded_retrieve(retriever, queries, k, devices, sharding.accelerator, sharding.strategy, device)
    return time_retrieval(retriever, queries, k, device)


def _write_traces(path: Path, bundle: CorpusBundle, result: RetrievalResult, gold: list[set[int]]) -> None:
    ids = bundle.graph.passage_id
    with path.open("w") as handle:
        for q, trace, relevant in zip(bundle.eval.questions, result.traces, gold):
            record: dict[str, Any] = {
                "id": q.id,
                "question": q.text,
                "gold": [ids[g] for g in sorted(relevant)],
                "top": [{"id": ids[i], "title": bundle.eval.corpus[i].title, "score": s, "gold": i in relevant} for i, s in trace["top"]],
            }
            if "seeds" in trace:
                record["seeds"] = [ids[s] for s in trace["seeds"]]
            if "candidates" in trace:
                record["num_candidates"] = len(trace["candidates"])
                record["num_kept_edges"] = len(trace["kept_edges"])
                record["pruned_edges"] = [[ids[u], ids[v]] for u, v in trace["pruned_edges"]]
            handle.write(json.dumps(record) + "\n")


def evaluate_retriever(
    rcfg: DictConfig, cfg: DictConfig, bundle: CorpusBundle, queries: Queries, gold: list[set[int]], ball, out_dir: Path
) -> tuple[dict[str, Any], RetrievalResult]:
    retriever = build_retriever(rcfg, bundle, ball)
    device = device_of(rcfg.get("device"))
    result, seconds = timed_retrieve(retriever, queries, cfg.k, device, cfg.get("sharding"))
    metrics: dict[str, Any] = retrieval_metrics(result.indices, gold, tuple(cfg.ks))
    metrics["latency_ms_per_query"] = 1000.0 * seconds / len(queries)
    local_edges = result.stats.get("local_edges")
    metrics["removed_edge_fraction"] = result.stats["removed_edges"] / local_edges if local_edges else 0.0
    if "candidates" in result.stats:
        metrics["candidates_per_query"] = result.stats["candidates"] / len(queries)
    metrics["config"] = OmegaConf.to_container(rcfg, resolve=True)
    if cfg.get("traces", True) and process_rank() == 0:
        traced = retriever.retrieve(queries, cfg.k, trace=True)
        _write_traces(out_dir / f"traces_{rcfg.name}.jsonl", bundle, traced, gold)
        if rcfg.kind == "iso" and cfg.get("case_study") is not None:
            q = _question_position(bundle, cfg.case_study)
            plot_case_study(traced.traces[q], gold[q], [p.title for p in bundle.eval.corpus], bundle.eval.questions[q].text,
                            out_dir / f"case_study_{rcfg.name}.png")
    return metrics, result


def answer_with_llm(cfg: DictConfig, bundle: CorpusBundle, result: RetrievalResult, out_dir: Path) -> dict[str, Any]:
    """Ask ``cfg.qa``'s generator each question with its top ``qa.top_k`` passages; EM/F1/prompt tokens."""
    generator = build_generator(cfg.qa, out_dir)
    template = PromptTemplate(**OmegaConf.to_container(cfg.qa.template, resolve=True))
    passages = [[bundle.eval.corpus[i] for i in row[: cfg.qa.top_k]] for row in result.indices.tolist()]
    metrics, rows = answer_questions(generator, template, bundle.eval.questions, passages)
    with (out_dir / "qa_predictions.jsonl").open("w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return metrics


def _question_position(bundle: CorpusBundle, wanted: Any) -> int:
    for i, q in enumerate(bundle.eval.questions):
        if q.id == str(wanted):
            return i
    if isinstance(wanted, int) and 0 <= wanted < len(bundle.eval.questions):
        return wanted
    raise ValueError(f"case_study={wanted!r} is neither a question id nor a question index")


@dataclass
class EvaluationInputs:
    """Everything a retriever is scored on: corpus bundle, encoded queries, gold rows."""

    bundle: CorpusBundle
    queries: Queries
    gold: list[set[int]]
    encode_ms_per_query: float


def prepare_evaluation(cfg: DictConfig) -> EvaluationInputs:
    """Load, embed and build the graph; encode the (first ``max_questions``) questions."""
    bundle = prepare_corpus(cfg)
    questions = bundle.eval.questions[: cfg.max_questions] if cfg.get("max_questions") else bundle.eval.questions
    bundle.eval.questions = questions
    row = {pid: i for i, pid in enumerate(bundle.graph.passage_id)}
    gold = [{row[g] for g in q.gold_ids} for q in questions]
    encoder = build_encoder(cfg.encoder)
    start = time.perf_counter()
    queries = Queries([q.text for q in questions], encoder.encode([q.text for q in questions]))
    encode_ms = 1000.0 * (time.perf_counter() - start) / len(questions)
    return EvaluationInputs(bundle, queries, gold, encode_ms)


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """Evaluate the configured retriever(s); writes ``metrics.json`` (and ``metrics_out``)."""
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs = prepare_evaluation(cfg)
    bundle, queries, gold, encode_ms = inputs.bundle, inputs.queries, inputs.gold, inputs.encode_ms_per_query
    questions = bundle.eval.questions
    ball = ball_provider(cfg, bundle, out_dir)
    results, primary_result = {}, None
    for rcfg in retriever_configs(cfg):
        results[rcfg.name], result = evaluate_retriever(rcfg, cfg, bundle, queries, gold, ball, out_dir)
        primary_result = primary_result or result
    primary = next(iter(results.values()))
    if process_rank() != 0:  # an extra rank of a sharded run: rank 0 answers, writes and prints
        return {**primary, "retrievers": results}
    if cfg.get("qa"):
        primary.update(answer_with_llm(cfg, bundle, primary_result, out_dir))
    summary = {
        **{k: v for k, v in primary.items() if k != "config"},
        "retriever": next(iter(results)),
        "n_questions": len(questions),
        "sharding_devices": int(cfg.sharding.devices) if cfg.get("sharding") else 1,
        "query_encoding_ms_per_query": encode_ms,
        "dataset": bundle.eval.name,
        "split": cfg.get("split", "dev"),
        "builders": list(bundle.graph.builders),
        "leak": bundle.leak,
        "graph": bundle.stats,
        "retrievers": results,
    }
    if bundle.leak:
        summary["leak_note"] = "graph built from the evaluated questions' own contexts: a leak, not a held-out result"
    text = json.dumps(summary, indent=2)
    (out_dir / "metrics.json").write_text(text)
    if cfg.get("metrics_out"):
        Path(cfg.metrics_out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.metrics_out).write_text(text)
    print_table(summary, tuple(cfg.ks))
    return summary


def print_table(summary: dict[str, Any], ks: tuple[int, ...]) -> None:
    leak = " [LEAK]" if summary["leak"] else ""
    table = Table(title=f"{summary['dataset']} ({summary['split']}, {summary['n_questions']} questions, graph: {'+'.join(summary['builders'])}){leak}")
    columns = [f"{m}@{k}" for m in ("recall", "precision") for k in ks]
    for name in ["retriever", *columns, "ms/query", "pruned"]:
        table.add_column(name)
    for name, m in summary["retrievers"].items():
        table.add_row(name, *(f"{m[c]:.3f}" for c in columns), f"{m['latency_ms_per_query']:.3f}", f"{m['removed_edge_fraction']:.2f}")
    Console().print(table)
