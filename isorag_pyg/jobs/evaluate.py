"""The ``evaluate`` app's job: score one or more retrievers over a dataset's index, write metrics,
traces, a case study and (with ``qa``) LLM answers."""
from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from hydra import compose
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from isorag_pyg.evaluation.compare import evaluate_retrievers, time_retrieval
from isorag_pyg.evaluation.sharded import sharded_retrieve
from isorag_pyg.experiments.inputs import EvaluationInputs, evaluation_inputs
from isorag_pyg.index.registry import REGISTRY, resolve_knobs
from isorag_pyg.index.results import nodes_by_row
from isorag_pyg.jobs import config as conf
from isorag_pyg.jobs.indexing import dataset_index, process_rank
from isorag_pyg.qa.runner import answer_questions
from isorag_pyg.retrieval.trace_plot import plot_case_study
from isorag_pyg.retrieval.types import Queries, RetrievalResult, Retriever

log = logging.getLogger(__name__)


def prepare_evaluation(cfg: DictConfig, out_dir: Path | None = None, retrievers: list[DictConfig] | None = None) -> EvaluationInputs:
    """Load the dataset, open or build its index, and hand them to the library's
    :func:`~isorag_pyg.experiments.inputs.evaluation_inputs` (the first ``max_questions`` questions).
    ``retrievers`` (default: ``cfg.retriever``) tell whether the index needs f_θ."""
    out_dir = Path(out_dir if out_dir is not None else cfg.paths.output_dir)
    eval_ds, train_ds = conf.split_datasets(cfg)
    index = dataset_index(cfg, eval_ds, train_ds, out_dir, conf.needs_f_theta(cfg, retrievers if retrievers is not None else [cfg.retriever]))
    return evaluation_inputs(index, eval_ds, conf.encoder(cfg.encoder))


def config_retriever(inputs: EvaluationInputs, rcfg: DictConfig) -> Retriever:
    """The retriever of a ``retriever`` config: its kind, device and knobs."""
    _, name, knobs = conf.retriever_knobs(rcfg)
    return inputs.retriever(name, rcfg.get("device", "auto"), **knobs)


def run_knobs(inputs: EvaluationInputs, rcfg: DictConfig) -> dict[str, Any]:
    """The knobs a ``retriever`` config's retriever runs with (those it sets, over the index's stored
    ones, over the defaults), and for ISO-RAG the φ recipe's ``p``, ``eps``, ``shell_floor``."""
    _, name, given = conf.retriever_knobs(rcfg)
    knobs, phi_changes = resolve_knobs(name, inputs.index.knobs, given)
    phi = {key: phi_changes.get(key, getattr(inputs.index.phi, key)) for key in REGISTRY[name].phi_overrides}
    return {**knobs.to_dict(), **phi}


def retriever_configs(cfg: DictConfig) -> list[DictConfig]:
    """``cfg.retriever``, or every config named in ``cfg.compare`` (composed like ``retriever=<name>``);
    ``ValueError`` when ``compare`` comes with ``retriever.<knob>=...`` changes, which its entries would not get."""
    if not cfg.get("compare"):
        return [cfg.retriever]
    own = compose(config_name="eval", overrides=[f"retriever={cfg.retriever.name}"]).retriever
    if changed := sorted(k for k in set(cfg.retriever) | set(own) if cfg.retriever.get(k) != own.get(k)):
        raise ValueError(f"retriever.{', retriever.'.join(changed)} would not reach the compare=[...] entries (each is composed from "
                         "its own config): drop compare, or compare configs that set the knob")
    return [compose(config_name="eval", overrides=[f"retriever={name}"]).retriever for name in cfg.compare]


def sharded_timing(sharding: DictConfig | None):
    """The timed retrieval: one batched call, or the queries sharded over ``sharding.devices``
    DDP ranks (then the slowest rank's seconds)."""
    devices = 1 if sharding is None else int(sharding.devices)
    if devices < 1:
        raise ValueError(f"sharding.devices must be >= 1, got {devices}")

    def timed(retriever: Retriever, queries: Queries, k: int) -> tuple[RetrievalResult, float]:
        if devices > 1 and len(queries) < devices:  # a rank would get no question: not worth processes
            log.warning("%d question(s) for %d ranks: retrieving in one process", len(queries), devices)
        elif devices > 1:
            return sharded_retrieve(retriever, queries, k, devices, sharding.accelerator, sharding.strategy)
        return time_retrieval(retriever, queries, k)

    return timed


def named_rows(inputs: EvaluationInputs, rows: Any) -> dict[int, tuple[str, str, str]]:
    """Graph row -> (id, title, text): a passage's own, or an entity graph's entity node's (``entity:<name>``)."""
    return nodes_by_row(inputs.index.passages, getattr(inputs.index.graph, "entity_names", []), rows)


def write_traces(path: Path, inputs: EvaluationInputs, result: RetrievalResult) -> None:
    passages = inputs.index.passages
    with path.open("w") as handle:
        for q, trace, relevant in zip(inputs.dataset.questions, result.traces, inputs.gold):
            record: dict[str, Any] = {
                "id": q.id,
                "question": q.text,
                "gold": [passages[g].id for g in sorted(relevant)],
                "top": [{"id": passages[i].id, "title": passages[i].title, "score": s, "gold": i in relevant} for i, s in trace["top"]],
            }
            if "seeds" in trace:
                record["seeds"] = [passages[s].id for s in trace["seeds"]]
            if trace.get("entity_seeds"):
                names = named_rows(inputs, trace["entity_seeds"])
                record["entity_seeds"] = [names[r][0] for r in trace["entity_seeds"]]
            if "candidates" in trace:
                record["num_candidates"] = len(trace["candidates"])
                record["num_kept_edges"] = len(trace["kept_edges"])
                names = named_rows(inputs, [row for edge in trace["pruned_edges"] for row in edge])
                record["pruned_edges"] = [[names[u][0], names[v][0]] for u, v in trace["pruned_edges"]]
            handle.write(json.dumps(record) + "\n")


def question_position(questions: list, wanted: Any) -> int:
    for i, q in enumerate(questions):
        if q.id == str(wanted):
            return i
    if isinstance(wanted, int) and 0 <= wanted < len(questions):
        return wanted
    raise ValueError(f"case_study={wanted!r} is neither a question id nor a question index")


def answer_with_llm(cfg: DictConfig, inputs: EvaluationInputs, result: RetrievalResult, out_dir: Path) -> dict[str, Any]:
    """Ask ``cfg.qa``'s reader each question with its top ``qa.top_k`` passages, in the reader's
    prompt template; EM/F1/prompt tokens."""
    passages = [[inputs.index.passages[i] for i in row[: cfg.qa.top_k]] for row in result.indices.tolist()]
    with conf.reader_spec(cfg.qa, out_dir).make() as reader:
        metrics, rows = answer_questions(reader.generator, reader.template, inputs.dataset.questions, passages)
    with (out_dir / "qa_predictions.jsonl").open("w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return metrics


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """Evaluate the configured retriever(s); writes ``metrics.json`` (and ``metrics_out``)."""
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rcfgs = retriever_configs(cfg)
    inputs = prepare_evaluation(cfg, out_dir, rcfgs)
    if cfg.get("case_study") is not None:
        question_position(inputs.dataset.questions, cfg.case_study)  # a bad id fails before any retrieval
    retrievers = {rcfg.name: config_retriever(inputs, rcfg) for rcfg in rcfgs}
    runs = evaluate_retrievers(retrievers, inputs.queries, inputs.gold, cfg.k, tuple(cfg.ks), sharded_timing(cfg.get("sharding")))
    results = {label: {**run.metrics, "config": conf.plain(rcfg), "knobs": run_knobs(inputs, rcfg)}
               for (label, run), rcfg in zip(runs.items(), rcfgs)}
    primary_label = rcfgs[0].name
    primary = results[primary_label]
    if process_rank() != 0:  # an extra rank of a sharded run: rank 0 answers, writes and prints
        return {**primary, "retrievers": results}
    if cfg.get("traces", True):
        for rcfg in rcfgs:
            traced = retrievers[rcfg.name].retrieve(inputs.queries, cfg.k, trace=True)
            write_traces(out_dir / f"traces_{rcfg.name}.jsonl", inputs, traced)
            if rcfg.kind == "iso" and cfg.get("case_study") is not None:
                q = question_position(inputs.dataset.questions, cfg.case_study)
                titles = {r: title for r, (_, title, _) in named_rows(inputs, traced.traces[q]["candidates"]).items()}
                plot_case_study(traced.traces[q], inputs.gold[q], titles, inputs.dataset.questions[q].text, out_dir / f"case_study_{rcfg.name}.png",
                                len(inputs.index.passages))
    if cfg.get("qa"):
        primary.update(answer_with_llm(cfg, inputs, runs[primary_label].result, out_dir))
    index = inputs.index
    summary = {
        **{k: v for k, v in primary.items() if k != "config"},
        "retriever": primary_label,
        "n_questions": len(inputs.queries),
        "sharding_devices": int(cfg.sharding.devices) if cfg.get("sharding") else 1,
        "query_encoding_ms_per_query": inputs.encode_ms_per_query,
        "dataset": inputs.dataset.name,
        "split": cfg.get("split", "dev"),
        "index": str(cfg.index) if cfg.get("index") else None,
        "builders": list(index.statistics["builders"]),
        "leak": index.leak,
        "graph": {k: v for k, v in index.statistics.items() if k != "builders"},
        "phi": dataclasses.asdict(index.phi),
        "retrievers": results,
    }
    if index.leak:
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
    metrics = [(f"{m}@{k}", f"{m[0].upper()}@{k}") for m in ("recall", "precision") for k in ks]  # key, heading (R@5: fits 80 columns)
    columns = [key for key, _ in metrics]
    table.add_column("retriever", no_wrap=True)  # names such as iso_synthetic_uniform stay whole
    for heading in [*(heading for _, heading in metrics), "ms/query", "pruned"]:
        table.add_column(heading)
    for name, m in summary["retrievers"].items():
        table.add_row(name, *(f"{m[c]:.3f}" for c in columns), f"{m['latency_ms_per_query']:.3f}", f"{m['removed_edge_fraction']:.2f}")
    Console().print(table)
