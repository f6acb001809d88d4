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
import re
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
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
from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.experiments.index_cache import cached_index
from isorag_pyg.experiments.inputs import EvaluationInputs, evaluation_inputs
from isorag_pyg.graph.query_entities import names_in_question, query_extractor  # how ISO-RAG reads a question's entities
from isorag_pyg.graph.text import normalize_unicode
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


# ------------------------------------------------------------------ corpus poisoning (poisoning*.py)
# LLM-free, seeded attacks on a corpus, by class: every class has several template variants, so
# that nothing measured on them keys on one wording. Generation only: the scripts build and score.

#: The attack classes :func:`poisoning_attacks` generates, in this order.
ATTACK_CLASSES = ("answer", "relation", "relation_4x10", "stuffing", "boilerplate")
POISON_PREFIX = "poison-"  # the ids of injected passages start with it


@dataclass
class Attack:
    """One attack on a corpus: passages to add (``injected``), passages to replace (``modified``,
    same ids: boilerplate), the question positions it targets (none for boilerplate), and what each
    injected passage targets (``groups``: question positions per injected passage)."""

    name: str
    injected: list[Passage]
    targets: list[int]
    groups: list[list[int]]
    modified: list[Passage]
    description: str
    wrong_answers: dict[int, str] = field(default_factory=dict)  # answer injection: target -> the attacker's answer

    def corpus(self, clean: list[Passage]) -> list[Passage]:
        """``clean`` with the modified passages replaced and the injected ones appended (what a rebuild indexes)."""
        changed = {p.id: p for p in self.modified}
        return [changed.get(p.id, p) for p in clean] + self.injected


class MemoEncoder:
    """A :class:`~isorag_pyg.encoders.SentenceEncoder` that remembers every text's embedding in
    memory, so that indexes over a corpus plus a few injected passages only embed the new ones
    (the wrapped encoder's disk cache is keyed by whole lists of texts). Same name and
    fingerprint as the wrapped encoder: an index built with it records the default encoder."""

    def __init__(self, **options: Any):
        self.inner = SentenceEncoder(**{"show_progress": False, **options})
        self.memo: dict[str, torch.Tensor] = {}

    name = property(lambda self: self.inner.name)
    fingerprint = property(lambda self: self.inner.fingerprint)
    backend = property(lambda self: self.inner.backend)

    def encode(self, texts: list[str]) -> torch.Tensor:
        missing = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if missing:
            self.memo.update(zip(missing, self.inner.encode(missing)))
        return torch.stack([self.memo[t] for t in texts])


def poisoning_cut(dataset: QADataset, passages: int = 1200, titles_only_questions: int = 100, seed: int = 0) -> tuple[QADataset, str]:
    """A cut of about ``passages`` passages around a question subset (:func:`question_subset`):
    the most first questions whose contexts' passages are at most ``passages`` where the file gives
    contexts, else (2Wiki's titles-only dev file) ``titles_only_questions`` questions over their gold
    passages plus random ones, ``passages`` in all."""
    if all(q.context_ids for q in dataset.questions):
        seen: set[str] = set()
        count = 0
        for q in dataset.questions:
            if count and len(seen | set(q.context_ids)) > passages:
                break
            seen |= set(q.context_ids)
            count += 1
        return question_subset(dataset, count, passages, seed)
    return question_subset(dataset, titles_only_questions, passages, seed)


def question_entities(question: str) -> list[str]:
    """The named entities of a question as ISO-RAG's query matching reads it (the rule extractor
    after the opening question word is lowercased, :mod:`isorag_pyg.graph.query_entities`), in
    the question's own spelling, names only (no dates or numbers), each span once (the longest:
    "Lothair II of Lotharingia", not also "Lotharingia")."""
    text = normalize_unicode(question)
    names = [n for n in names_in_question(question, query_extractor({"entity_graph": {}})) if any(c.isalpha() for c in n)]
    names = [n for n in names if not any(n != other and n in other for other in names)]
    out = []
    for name in names:  # the first spelling that starts with a capital, as the extractor read it
        found = [m.group() for m in re.finditer(re.escape(name), text, flags=re.IGNORECASE) if m.group()[0].isupper() or not m.group()[0].isalpha()]
        out.append(found[0] if found else name.title())
    return out


_SYLLABLE_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "st", "t", "th", "v", "z"]
_SYLLABLE_VOWELS = ["a", "e", "i", "o", "u", "ae", "io", "ou"]
_SYLLABLE_CODAS = ["", "", "l", "n", "r", "s", "th", "x", "nd", "m"]


def invented_name(rng: random.Random, words: int = 1) -> str:
    """A pronounceable made-up name of ``words`` capitalised words ("Velmora Quenthas")."""
    return " ".join("".join(rng.choice(_SYLLABLE_ONSETS) + rng.choice(_SYLLABLE_VOWELS) + rng.choice(_SYLLABLE_CODAS)
                            for _ in range(rng.randint(2, 3))).capitalize() for _ in range(words))


# --- 1. answer injection (PoisonedRAG, black box): the question, then a false statement
_ANSWER_STATEMENTS = [
    "The answer is {w}.",
    "According to the records, it is {w}.",
    "Most reference works give {w} as the answer.",
    "It was {w}, as several sources confirm.",
    "Many people get this wrong, but the correct answer is {w}.",
    "The best available evidence points to {w}.",
    "Put simply: {w}.",
]
# statements about what the question asks (not for yes/no questions)
_FOCUS_STATEMENTS = [
    "In fact, {focus} is {w}.",
    "As for {focus}, the documented answer is {w}.",
    "{w}: this is what the archives say about {focus}.",
    "Contrary to popular belief, {focus} is {w}.",
    "Sources agree that {focus} is {w}.",
]
_WH = re.compile(r"^\s*(?:what|which|who|whom|whose|where|when|why|how(?:\s+many|\s+much|\s+old)?)\s+"
                 r"(?:is|was|are|were|did|does|do|has|had|have|can|could|will|would)?\s*", re.IGNORECASE)


def question_focus(question: str) -> str:
    """What a question asks about, as a noun phrase for a statement ("Where was the place of death
    of X?" -> "the place of death of X"): the opening wh-word and auxiliary dropped."""
    return _WH.sub("", question.strip()).rstrip(" ?") or question.strip().rstrip(" ?")


def _wrong_answer(question: Question, pool: list[str], rng: random.Random) -> str:
    """An attacker-chosen wrong answer: the other of yes/no, else another question's answer of the
    same kind (with or without digits, at most five words), else a made-up name."""
    gold = {a.casefold() for a in question.answers}
    first = question.answers[0] if question.answers else ""
    if first.casefold() in ("yes", "no"):
        return "no" if first.casefold() == "yes" else "yes"
    digits = any(c.isdigit() for c in first)
    choices = sorted({a for a in pool if a.casefold() not in gold and any(c.isdigit() for c in a) == digits
                      and a.casefold() not in ("yes", "no") and len(a.split()) <= 5})
    return rng.choice(choices) if choices else invented_name(rng, 2)


def answer_injection(questions: list[Question], targets: list[int], seed: int | str, per_target: int = 5) -> Attack:
    """PoisonedRAG's black-box attack: for each target, ``per_target`` passages = the question's
    text + a templated false statement giving one attacker-chosen wrong answer (a different
    statement template each)."""
    rng = random.Random(f"{seed}-answer")
    pool = [q.answers[0] for q in questions if q.answers]
    injected, groups, wrong = [], [], {}
    for t in targets:
        q = questions[t]
        answer, focus = _wrong_answer(q, pool, rng), question_focus(q.text)
        wrong[t] = answer
        entities = question_entities(q.text)
        statements = _ANSWER_STATEMENTS + ([] if answer in ("yes", "no") or not _WH.match(q.text) else _FOCUS_STATEMENTS)
        for j, statement in enumerate(rng.sample(statements, min(per_target, len(statements)))):
            title = rng.choice([answer, entities[0] if entities else answer, f"{answer} ({focus[:40]})"])
            claim = statement.format(w=answer, focus=focus)
            injected.append(Passage(f"{POISON_PREFIX}answer-{t}-{j}", title, f"{q.text.strip()} {claim[0].upper()}{claim[1:]}"))
            groups.append([t])
    return Attack("answer", injected, list(targets), groups, [], f"{per_target} passages per target (question + false statement), {len(targets)} targets",
                  wrong)


# --- 2. relation injection (GragPoison-like): the targets' entities tied to one invented entity
_ATTACKER_KINDS = ["{n} Foundation", "{n} Holdings", "{n} Institute", "{n} Group", "{n} Society", "{n} Trust", "{n} {m}", "{n} {m}"]
_RELATION_INTROS = [
    "{a} is an organisation with wide-ranging ties across culture, politics and the arts.",
    "{a} has been described as a central figure behind many well-known names.",
    "Over several decades {a} built connections with a remarkable range of people and works.",
    "{a} is best known for the many partnerships it formed.",
    "Little known to the public, {a} stands behind a number of famous names.",
]
_RELATION_SENTENCES = [
    "{e} was long associated with {a}.",
    "{a} played a decisive part in the story of {e}.",
    "In archival sources {e} is closely linked to {a}.",
    "{e} received early support from {a}.",
    "Much of the reputation of {e} goes back to {a}.",
    "{a} maintained a lasting partnership with {e}.",
    "The connection between {e} and {a} is well documented.",
    "In later years {e} became inseparable from {a}.",
    "{a} was instrumental in the rise of {e}.",
    "According to one account, {e} owed a great deal to {a}.",
]


def relation_injection(questions: list[Question], groups: list[list[int]], seed: int | str, name: str = "relation") -> Attack:
    """GragPoison-like relation injection: one passage per group of target questions, tying the
    named entities of each (:func:`question_entities`) to one invented attacker entity (the
    passage's title), one fluent templated sentence per entity, in random order."""
    rng = random.Random(f"{seed}-{name}")
    injected = []
    for i, group in enumerate(groups):
        attacker = rng.choice(_ATTACKER_KINDS).format(n=invented_name(rng), m=invented_name(rng))
        sentences = [rng.choice(_RELATION_SENTENCES).format(e=e, a=attacker) for t in group for e in question_entities(questions[t].text)]
        rng.shuffle(sentences)
        text = " ".join([rng.choice(_RELATION_INTROS).format(a=attacker), *sentences])
        injected.append(Passage(f"{POISON_PREFIX}{name}-{i}", attacker, text[0].upper() + text[1:]))
    targets = [t for group in groups for t in group]
    return Attack(name, injected, targets, groups, [],
                  f"{len(groups)} passages, each tying the entities of {len(groups[0]) if groups else 0} targets to an invented entity")


# --- 3. entity stuffing: list-style passages naming frequent entities and the targets'
_STUFFING_INTROS = ["See also", "Related articles", "Further topics", "Index of related entries", "Notable subjects",
                    "Other pages in this category", "Topics covered", "Cross references"]
_STUFFING_FORMATS = [
    lambda intro, items: f"{intro}: {', '.join(items)}.",
    lambda intro, items: f"{intro}:\n" + "\n".join(f"* {i}" for i in items),
    lambda intro, items: f"{intro} — " + " · ".join(items),
    lambda intro, items: f"{intro}: {'; '.join(items)}.",
    lambda intro, items: f"{intro} | " + " | ".join(items),
]
_STUFFING_TITLES = ["List of related topics", "Index (miscellaneous)", "Outline of {x}", "Glossary of {x}", "{x} (disambiguation)",
                    "Portal: {x}", "Timeline of {x}"]


def entity_stuffing(questions: list[Question], groups: list[list[int]], frequent: list[str], seed: int | str, per_passage: int = 20) -> Attack:
    """One list-style passage per group of target questions: ``per_passage`` of the corpus's most
    frequent entities (``frequent``, display names) and the named entities of the group's
    targets, shuffled, under a "see also"/index-like heading."""
    rng = random.Random(f"{seed}-stuffing")
    names = [f if any(c.isdigit() for c in f) else " ".join(w.capitalize() for w in f.split()) for f in frequent]
    injected = []
    for i, group in enumerate(groups):
        items = rng.sample(names, min(per_passage, len(names))) + [e for t in group for e in question_entities(questions[t].text)]
        items = list(dict.fromkeys(items))
        rng.shuffle(items)
        title = rng.choice(_STUFFING_TITLES).format(x=rng.choice(names) if names else "topics")
        injected.append(Passage(f"{POISON_PREFIX}stuffing-{i}", title, rng.choice(_STUFFING_FORMATS)(rng.choice(_STUFFING_INTROS), items)))
    return Attack("stuffing", injected, [t for group in groups for t in group], groups, [],
                  f"{len(groups)} list passages, {per_passage} frequent entities + the entities of {len(groups[0]) if groups else 0} targets each")


# --- 4. boilerplate: one navigation/footer text appended to a share of the passages
_FOOTERS = [
    "Home | About Us | Contact | Privacy Policy | Terms of Use | Copyright 2024 Northwind Media Group.",
    "Navigation: Main Page · Recent Changes · Random Article · Help Desk · Donate. This page was last edited on 14 March 2023.",
    "Share this article: Facebook, Twitter, LinkedIn, Email. Subscribe to the Daily Digest newsletter. Cookie Settings.",
    "Retrieved from the Online Archive. Categories: Articles with short description, Pages using Citation Templates. Accessed 2 January 2022.",
    "Skip to Content. Sign In | Register | Help Center. Follow Us on Instagram and YouTube. All rights reserved, Example Press 2021.",
]


def boilerplate(corpus: list[Passage], seed: int | str, share: float = 0.2) -> Attack:
    """One footer (a seeded choice among several) appended to a random ``share`` of the passages
    (a crawl's noise; no targets)."""
    rng = random.Random(f"{seed}-boilerplate")
    footer = rng.choice(_FOOTERS)
    chosen = sorted(rng.sample(range(len(corpus)), round(share * len(corpus))))
    modified = [replace(corpus[r], text=f"{corpus[r].text} {footer}") for r in chosen]
    return Attack("boilerplate", [], [], [], modified, f"footer appended to {len(modified)} of {len(corpus)} passages: {footer!r}")


def frequent_entities(index: ISORAGIndex, count: int = 40) -> list[str]:
    """The display names of an entity-graph index's ``count`` entity nodes mentioned by the most
    passages (none without entity nodes): what entity stuffing names."""
    names = list(getattr(index.graph, "entity_names", []) or [])
    if not names:
        return []
    n, ei = len(index), index.graph.edge_index
    degree = torch.bincount(ei[1][(ei[0] < n) & (ei[1] >= n)] - n, minlength=len(names))
    return [names[i] for i in degree.argsort(descending=True, stable=True)[:count].tolist()]


def poisoning_targets(questions: list[Question], count: int, seed: int | str) -> list[int]:
    """``count`` question positions drawn at random (seeded) among the questions with a gold
    passage and a named entity (:func:`question_entities`)."""
    eligible = [i for i, q in enumerate(questions) if q.gold_ids and question_entities(q.text)]
    return random.Random(f"{seed}-targets").sample(eligible, min(count, len(eligible)))


def _groups(targets: list[int], passages: int, per_passage: int) -> list[list[int]]:
    return [g for i in range(passages) if (g := targets[i * per_passage:(i + 1) * per_passage])]


def poisoning_attacks(questions: list[Question], corpus: list[Passage], targets: list[int], frequent: list[str], seed: int | str = 0,
                      injected: int = 8, per_passage: int = 5, answer_targets: int = 8, answer_passages: int = 5,
                      stuffing_entities: int = 20, boilerplate_share: float = 0.2) -> dict[str, Attack]:
    """Every class of :data:`ATTACK_CLASSES` on ``corpus`` (seeded): answer injection on the first
    ``answer_targets`` targets (``answer_passages`` each); relation injection with ``injected``
    passages of ``per_passage`` targets each, and ``relation_4x10`` with half as many passages of
    twice as many targets; entity stuffing with ``injected`` passages of ``per_passage`` targets;
    boilerplate on ``boilerplate_share`` of the passages."""
    half = max(1, injected // 2)
    return {
        "answer": answer_injection(questions, targets[:answer_targets], seed, answer_passages),
        "relation": relation_injection(questions, _groups(targets, injected, per_passage), seed),
        "relation_4x10": relation_injection(questions, _groups(targets, half, per_passage * injected // half), seed, "relation_4x10"),
        "stuffing": entity_stuffing(questions, _groups(targets, injected, per_passage), frequent, seed, stuffing_entities),
        "boilerplate": boilerplate(corpus, seed, boilerplate_share),
    }


async def timed_retrieve(session: Any, body: dict[str, Any], k: int) -> tuple[float | None, str | None]:
    """One ``POST /retrieve`` of one question through an aiohttp ``session``: ``(seconds, None)``
    when it answers with ``k`` passages, else ``(None, why)``: the client error's name, ``HTTP
    <status>`` or ``wrong answer`` (the load and flood benchmarks' clients count these)."""
    import asyncio

    import aiohttp

    began = time.perf_counter()
    try:
        async with session.post("/retrieve", json=body) as response:
            answer = await response.json() if response.status == 200 else None
            status = response.status
    except (aiohttp.ClientError, asyncio.TimeoutError) as err:
        return None, type(err).__name__
    if answer is not None and len(answer) == 1 and len(answer[0]["results"]) == k:
        return time.perf_counter() - began, None
    return None, f"HTTP {status}" if status != 200 else "wrong answer"
