"""Everything the benchmark scripts share, in one module: configs, result files, timing, the
profile-gap signal and the tuning grids. The scripts import only from here and the library; this
is the one benchmark module that reads the hydra configs (through ``isorag_pyg.jobs.config``) and
hands the library plain arguments."""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import igraph as ig
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from torchmetrics.functional.classification import binary_auroc

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets import QADataset
from isorag_pyg.datasets.types import Passage
from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.experiments.index_cache import cached_index
from isorag_pyg.experiments.inputs import EvaluationInputs, evaluation_inputs
from isorag_pyg.jobs import config as conf
from isorag_pyg.jobs.config import RETRIEVER_META, plain
from isorag_pyg.qa import OpenAIChatGenerator, PromptTemplate
from isorag_pyg.qa.llama_server import Timing
from isorag_pyg.retrieval import Queries, Retriever
from isorag_pyg.training.config import FThetaConfig

REPO = Path(__file__).resolve().parents[1]
CONF = str(REPO / "conf")
# ISORAG_BENCH_RESULTS redirects the JSON (the smoke tests use it to keep benchmarks/results/ untouched)
RESULTS = Path(os.environ.get("ISORAG_BENCH_RESULTS", REPO / "benchmarks" / "results"))
DATA_DIR = os.environ.get("ISORAG_DATA_DIR", str(REPO.parent / "shared" / "datasets"))


def _compose(config: str, overrides: list[str]) -> DictConfig:
    """``conf/<config>.yaml`` with hydra overrides."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config, overrides=overrides)


def _eval_config(*overrides: str) -> DictConfig:
    """The ``eval`` config with overrides (no hydra run directory: output goes to a temp dir)."""
    return _compose("eval", [f"paths.output_dir={tempfile.mkdtemp(prefix='isorag-bench-')}", f"++dataset.data_dir={DATA_DIR}",
                             "encoder.show_progress=false", "train_f_theta=true",  # the scripts compare φ with and without f_θ's volumes
                             *overrides])


@dataclass
class Setup:
    """What the ``eval`` config with some overrides chooses, as plain values: all a script sees of
    the configs."""

    dataset: QADataset  # the questions to evaluate, with their corpus (``split`` honoured; the first ``max_questions``)
    train: QADataset | None  # the training questions beside them
    k: int  # passages retrieved per question
    options: dict[str, Any]  # ISORAGIndex.build's encoder, graph, phi and f_theta (FThetaConfig)
    qa: dict[str, Any] | None  # the reader's config (``qa=...``), or None


def setup(*overrides: str, backend: str | None = None) -> Setup:
    """The :class:`Setup` of the ``eval`` config with ``overrides`` (the encoder on ``backend``:
    default the configured one)."""
    cfg = _eval_config(*overrides)
    eval_ds, train_ds = conf.split_datasets(cfg)
    settings = conf.index_settings(cfg, backend=backend)
    return Setup(eval_ds, train_ds, int(cfg.k), {key: settings[key] for key in ("encoder", "graph", "phi", "f_theta")}, plain(cfg.qa))


def evaluation(*overrides: str) -> tuple[EvaluationInputs, int]:
    """The questions, their index and encoded questions that the ``eval`` config with
    ``overrides`` describes, and its ``k``: through the library's entry points with plain
    arguments, :func:`~isorag_pyg.experiments.index_cache.cached_index` (built once per settings, then cached)
    and :func:`~isorag_pyg.experiments.inputs.evaluation_inputs`."""
    cfg = _eval_config(*overrides)
    eval_ds, train_ds = conf.split_datasets(cfg)
    settings = conf.index_settings(cfg, conf.needs_f_theta(cfg, [cfg.retriever]))
    index = cached_index(eval_ds, train_ds, **settings, cache_dir=conf.index_cache_dir(cfg), work_dir=Path(cfg.paths.output_dir) / "f_theta")
    return evaluation_inputs(index, eval_ds, settings["encoder"]), int(cfg.k)


def f_theta_settings(*overrides: str) -> FThetaConfig:
    """f_θ's training config in the ``train`` config with ``overrides``."""
    return conf.f_theta_config(_compose("train", ["paths.output_dir=.", *overrides]))


def reader_config() -> dict[str, Any]:
    """The packaged reader's config (``qa=gguf``: stop strings, ``max_tokens``, ``top_k``...)."""
    return plain(_eval_config("qa=gguf").qa)


def has_retriever_config(name: str) -> bool:
    """Whether ``conf/retriever/<name>.yaml`` exists."""
    return (Path(CONF) / "retriever" / f"{name}.yaml").is_file()


def add_override_argument(parser: argparse.ArgumentParser) -> None:
    """``--override KEY=VALUE`` (repeatable): extra hydra overrides of the eval config, in ``args.override``."""
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra hydra override of the eval config (repeatable)")


@cache
def _retriever_base(name: str) -> dict[str, Any]:
    return {k: v for k, v in plain(_compose("eval", [f"retriever={name}", "paths.output_dir=."]).retriever).items() if v is not None}


def retriever_config(name: str, **overrides: Any) -> dict[str, Any]:
    """``conf/retriever/<name>.yaml`` (composed once per name) as a plain dict of the knobs it
    sets (a null knob is left to the index: what it stores, else the library's default), with
    knobs overridden or added (φ's ``p``, ``shell_floor``...)."""
    return {**_retriever_base(name), **overrides}


def make_retriever(inputs: EvaluationInputs, rcfg: dict[str, Any]) -> Retriever:
    """The retriever a :func:`retriever_config` dict describes, over the evaluation's index."""
    knobs = {k: v for k, v in rcfg.items() if k not in RETRIEVER_META}
    return inputs.retriever(rcfg["kind"], rcfg.get("device", "auto"), **knobs)


def machine() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "python": platform.python_version()}


def results_name(name: str) -> str:
    """A JSON file name under ``RESULTS`` (an argparse ``type``: a path with folders is refused
    when the script starts, not when it writes its results)."""
    if Path(name).name != name or not name.endswith(".json"):
        raise argparse.ArgumentTypeError(f"expected a file name ending in .json, written under {RESULTS} (got {name!r})")
    return name


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2))
    print(f"wrote {path}")
    return path


def best_rows(rows: list[dict[str, Any]], retriever: str = "iso") -> dict[str, dict[str, Any]]:
    """Per dataset, the tune_iso.py row of ``retriever`` (real φ where φ applies) with the best
    Recall@5 (the first such in grid order on ties)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["retriever"] != retriever or row.get("phi_mode", "real") != "real":
            continue
        if row["dataset"] not in best or row["recall@5"] > best[row["dataset"]]["recall@5"]:
            best[row["dataset"]] = row
    return best


# ---------------------------------------------------------------- timing
def per_query_ms(fn, queries: Queries, repeats: int = 3) -> float:
    """Median over ``repeats`` of one batched call, divided by the number of queries."""
    fn(queries.slice(0, 1))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(queries)
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times) / len(queries)


def single_query_ms(fn, queries: Queries, count: int) -> list[float]:
    out = []
    for i in range(min(count, len(queries))):
        start = time.perf_counter()
        fn(queries.slice(i, i + 1))
        out.append(1000.0 * (time.perf_counter() - start))
    return out


# ---------------------------------------------------------------- generated corpora
def generated_graph(n: int, m: int = 5, seed: int = 0) -> torch.Tensor:
    """A Barabási-Albert graph: ``n`` nodes, ``m`` edges per new node, both directions, ``[2, 2E]``."""
    random.seed(seed)  # igraph draws from Python's random module
    edges = torch.tensor(ig.Graph.Barabasi(n, m, directed=False).get_edgelist(), dtype=torch.long).t()
    return torch.cat([edges, edges.flip(0)], dim=1)


def generated_corpus(n: int, num_queries: int, dim: int = 384) -> tuple[torch.Tensor, torch.Tensor, Queries, torch.Tensor]:
    """:func:`generated_graph` (m = 5), random unit ``dim``-d embeddings, queries near random
    passages and a random log φ, all seeded: ``(edge_index, embeddings, queries, log_phi)``."""
    torch.manual_seed(0)
    edge_index = generated_graph(n)
    x = torch.nn.functional.normalize(torch.randn(n, dim), dim=-1)
    q = torch.nn.functional.normalize(x[torch.randint(0, n, (num_queries,))] + 0.5 * torch.randn(num_queries, dim) / dim**0.5, dim=-1)
    return edge_index, x, Queries([""] * num_queries, q), torch.randn(n, dtype=torch.float64)


# ---------------------------------------------------------------- the profile-gap signal
def useful_edge_mask(edge_index: torch.Tensor, gold: list[set[int]], n: int) -> torch.Tensor:
    keys = {u * n + v for g in gold for u in g for v in g if u != v}
    flat = (edge_index[0] * n + edge_index[1]).tolist()
    return torch.tensor([k in keys for k in flat])


def profile_gap(log_phi: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """|log φ_u − log φ_v| per edge; two empty shells (both −inf) count as equal profiles."""
    gap = (log_phi[edges[0]] - log_phi[edges[1]]).abs()
    return torch.where(torch.isnan(gap), torch.zeros_like(gap), gap)


def gap_auroc(gap: torch.Tensor, useful: torch.Tensor) -> float:
    """AUROC of −gap for useful against all other edges (nan when either class is empty)."""
    if not 0 < int(useful.sum()) < useful.numel():
        return float("nan")
    score = torch.where(torch.isfinite(gap), -gap, torch.full_like(gap, -1e9))
    return float(binary_auroc(score.float(), useful.long()))


# ---------------------------------------------------------------- tuning grids
# global PPR gets the same chance: its teleport probability and fusion weight, on the same questions
PPR_GRID = {"alpha": [0.5, 0.7, 0.85], "lambda_graph": [1.0, 0.9]}
# knobs that only shape φ: with uniform φ nothing is pruned, so their first value is enough
PHI_KNOBS = ("beta", "p", "shell_floor")


def settings(grid: dict[str, list]) -> list[dict[str, Any]]:
    """Every grid point, the uniform-φ control only at the first value of the φ-only knobs."""
    out = []
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values))
        if setting.get("phi_mode", "real") != "real" and any(setting[k] != grid[k][0] for k in PHI_KNOBS if k in grid):
            continue
        if "lambda_graph" in setting:
            setting["lambda_dense"] = round(1.0 - setting["lambda_graph"], 6)
        out.append(setting)
    return out


# ---------------------------------------------------------------- the reader (qa.py, reader_speed.py)
def template(entry: str) -> PromptTemplate:
    """``NAME[+KEY=VALUE...]``: ``conf/qa/template/NAME.yaml`` with hydra overrides of its keys
    (e.g. ``fewshot+passage_order=ranked``, ``fewshot+examples=[]``)."""
    name, *overrides = entry.split("+")
    cfg = _eval_config("qa=gguf", f"qa/template={name}", *(f"qa.template.{o}" for o in overrides))
    return PromptTemplate(**plain(cfg.qa.template))


def throughput(timings: list[Timing]) -> dict[str, float | None]:
    """llama.cpp's prompt and generation tokens per second over some completions."""
    prompt_ms, generation_ms = sum(t.prompt_ms for t in timings), sum(t.generation_ms for t in timings)
    return {"prompt_tokens_per_s": sum(t.prompt_tokens for t in timings) / prompt_ms * 1e3 if prompt_ms else None,
            "generation_tokens_per_s": sum(t.generated_tokens for t in timings) / generation_ms * 1e3 if generation_ms else None}


class Spread:
    """Requests split into contiguous shares over several generators (one llama.cpp server each),
    answered concurrently and returned in request order."""

    token_counter = OpenAIChatGenerator.token_counter

    def __init__(self, generators: list[OpenAIChatGenerator]):
        self.generators = generators

    def generate(self, requests: list) -> list[dict[str, Any]]:
        n = len(self.generators)
        shares = [requests[i * len(requests) // n:(i + 1) * len(requests) // n] for i in range(n)]
        with ThreadPoolExecutor(max_workers=n) as pool:
            return [record for part in pool.map(lambda g, r: g.generate(r), self.generators, shares) for record in part]


# ------------------------------------------------------------------ corpora with titles blanked (blank_titles*.py)


def blanked(corpus: list[Passage], keep: float = 0.0, seed: int = 0) -> list[Passage]:
    """The corpus with every title blanked (ids kept), but a random share ``keep`` of them (seeded)."""
    kept = torch.rand(len(corpus), generator=torch.Generator().manual_seed(seed)) < keep
    return [p if k else replace(p, title="") for p, k in zip(corpus, kept.tolist())]


@dataclass
class Split:
    """An index over one split's corpus, its encoded questions and their gold rows."""

    index: ISORAGIndex
    queries: Queries
    gold: list[set[int]]

    def recall(self, retriever: str, **knobs: Any) -> dict[str, float]:
        result = self.index.retriever(retriever, device="cpu", **knobs).retrieve(self.queries, 10)
        return retrieval_metrics(result.indices, self.gold)


def question_subset(dataset: QADataset, num_questions: int, num_passages: int, seed: int = 0) -> tuple[QADataset, str]:
    """The first ``num_questions`` questions over the passages of their contexts where the file
    gives contexts; otherwise (2Wiki's titles-only dev file) over their gold passages plus passages
    drawn at random (seeded) from the rest of the corpus, ``num_passages`` in all. Returns the
    subset and how its corpus was made."""
    questions = dataset.questions[:num_questions]
    if all(q.context_ids for q in questions):
        wanted = {pid for q in questions for pid in q.context_ids}
        how = "the passages of these questions' contexts"
    else:
        wanted = {pid for q in questions for pid in q.gold_ids}
        rest = [p.id for p in dataset.corpus if p.id not in wanted]
        order = torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed)).tolist()
        wanted |= {rest[i] for i in order[: max(0, num_passages - len(wanted))]}
        how = f"these questions' gold passages plus passages of the full corpus drawn at random (seed {seed})"
    corpus = [p for p in dataset.corpus if p.id in wanted]
    return replace(dataset, questions=questions, corpus=corpus), f"{len(questions)} questions, {len(corpus)} passages: {how}"


def titles_split(dataset: QADataset, titles: float, graph: dict[str, Any] | None) -> Split:
    """Index ``dataset``'s corpus (the share ``titles`` of its titles kept, the rest blanked)
    with ``graph`` (φ counts nodes, no f_θ)."""
    corpus = blanked(dataset.corpus, keep=float(titles))
    index = ISORAGIndex.build(corpus, graph=graph, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    row_of_text = {(p.title, p.text): r for r, p in enumerate(index.passages)}  # passages merged as duplicates keep a row
    original = {p.id: (p.title, p.text) for p in corpus}
    gold = []
    for q in dataset.questions:
        rows = {index.passages.row_of(g) for g in q.gold_ids}
        rows |= {row_of_text.get(original[g]) for g in q.gold_ids if index.passages.row_of(g) is None and g in original}
        gold.append({r for r in rows if r is not None})
    texts = [q.text for q in dataset.questions]
    return Split(index, index.encode_questions(texts), gold)
