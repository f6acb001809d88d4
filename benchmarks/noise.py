"""Graph retrieval against graph noise: where the isoperimetric filter earns its keep.

    python -m benchmarks.noise [--datasets musique hotpotqa 2wikimultihopqa] [--levels clean hub-1%x50 ...]

For each dataset and noise level (the clean title-mention graph; seeded hub shortcuts and random
shortcut edges added to it by the ``noise`` graph builder; the naturally noisy ``entity_comention``
graphs) the script

1. tunes every method's knobs on the TRAINING questions over their own corpus, with the same
   noise (same builder arguments and seed) on that corpus' graph: global PPR (tune_iso.py's
   PPR grid), ISO-RAG with real φ at p = 1 (f_θ trained on that noisy graph) and at p = 0 (φ
   counts nodes), and the uniform / shuffled / random φ ablations, each over ``GRID`` and each
   choosing its best Recall@5 (first in grid order on ties), as tune_iso.py does;
2. picks one robust default knob set for ISO-RAG (real φ) on the training questions across ALL
   datasets and levels (best mean Recall@5, among the settings that cost at most 0.5 points
   against uniform φ on every clean training graph);
3. runs, on the dev questions (held out: never used for any choice), dense retrieval, every
   tuned method, the fixed knobs of conf/retriever/iso.yaml and ppr.yaml (the library's defaults on these graphs; the fixed-knob curve),
   the robust default, and ISO-RAG with β set by a rule that reads only the graph (``beta_rule``).

The dev graph gets the same noise arguments as the training graph; f_θ is trained (and cached)
on each graph it is used with. Writes results/noise.json and results/noise.png (Recall@5 against
the noise level per method), and prints the share of the recall lost to noise that real φ wins
back, p = 1 against p = 0, and the issue's target checks.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import (
    PPR_GRID,
    RESULTS,
    add_override_argument,
    evaluation,
    make_retriever,
    retriever_config,
    settings,
    write_json,
)
from isorag_pyg.evaluation.metrics import per_question_recall, retrieval_metrics
from isorag_pyg.experiments.inputs import EvaluationInputs
from isorag_pyg.knobs import ISOKnobs


def beta_rule(edge_index: torch.Tensor, log_phi: torch.Tensor) -> dict[str, float]:
    """β from the graph alone, for corpora without questions: Otsu's threshold on the edges'
    profile gaps ``|log φ_u - log φ_v|``.

    Otsu's method splits the gaps into two classes with the largest between-class variance. Where
    hubs or shortcuts join nodes of very different profile, the large gaps form a class of their
    own and the threshold falls between the two; β is the ratio at that threshold, so the filter
    removes the large-gap class. ``separation`` (between-class over total variance, in [0, 1])
    says how clearly the gaps split. β is clipped to [0.01, 0.6], the range tuned on the training
    questions. Two equal profiles (also two zero ones) have gap 0, as in the filter.
    """
    src, dst = edge_index[:, edge_index[0] < edge_index[1]]
    a, b = log_phi[src].double(), log_phi[dst].double()
    gap = torch.where(a == b, torch.zeros_like(a), (a - b).abs())
    if gap.numel() < 2 or not bool((gap > 0).any()):
        return {"beta": 0.01, "threshold": 0.0, "separation": 0.0}
    finite = gap[torch.isfinite(gap)]
    gap = gap.nan_to_num(posinf=float(finite.max()) + 1.0).sort().values  # an empty shell (φ = 0, floor 0): the largest gap
    m = gap.numel()
    split = torch.arange(1, m, dtype=torch.float64)  # the first `split` gaps form the lower class
    below = gap.cumsum(0)[:-1]
    mean_low, mean_high = below / split, (gap.sum() - below) / (m - split)
    between = (split / m) * (1 - split / m) * (mean_low - mean_high) ** 2
    between[gap[1:] == gap[:-1]] = -1.0  # split only between distinct values
    best = int(between.argmax())
    threshold = float(gap[best] + gap[best + 1]) / 2
    total = float(gap.var(unbiased=False))
    beta = min(max(math.exp(-threshold), 0.01), 0.6)
    return {"beta": beta, "threshold": threshold, "separation": float(between[best]) / total if total > 0 else 0.0}


@dataclass(frozen=True)
class Level:
    """A graph: hydra overrides of ``graph``, and retriever knobs it implies (edge weights)."""

    overrides: tuple[str, ...]
    kind: str  # clean | hubs | random | natural
    retriever: dict[str, Any] = field(default_factory=dict)


def _noisy(hubs: float = 0, hub_degree: int = 0, random_ratio: float = 0.0) -> tuple[str, ...]:
    return ("graph=noisy", f"graph.builders.noise.hubs={hubs}", f"graph.builders.noise.hub_degree={hub_degree}",
            f"graph.builders.noise.random_ratio={random_ratio}")


# hubs as a share of the corpus, so that the noise per passage is the same on the training and
# dev corpora (1,000-6,000 passages); hub_degree and random_ratio as in the probe
LEVELS: dict[str, Level] = {
    "clean": Level(("graph=title_mention",), "clean"),
    "hub-1%x50": Level(_noisy(0.01, 50), "hubs"),
    "hub-2.5%x50": Level(_noisy(0.025, 50), "hubs"),
    "hub-2.5%x150": Level(_noisy(0.025, 150), "hubs"),
    "random-1x": Level(_noisy(random_ratio=1.0), "random"),
    "random-3x": Level(_noisy(random_ratio=3.0), "random"),
    "comention": Level(("graph=entity_comention",), "natural"),
    "rich-weighted": Level(("graph=rich",), "natural", {"edge_weights": True}),
}
HEADLINE = "hub-2.5%x150"  # conf/graph/noisy.yaml's defaults

# ISO-RAG's grid at every level (hops 1, hub cap 100, over-retrieval 5, lambda_graph 0.9: ISOKnobs' defaults)
GRID = {"alpha": [0.5, 0.85], "shell_floor": [8.0], "beta": [0.01, 0.05, 0.1, 0.2, 0.4]}
FAMILIES = ("iso_p1", "iso_p0", "iso_uniform", "iso_shuffled", "iso_random", "ppr")
CLEAN_COST = 0.005  # the robust default may cost at most this much Recall@5 against uniform φ on a clean graph


def family_settings() -> dict[str, list[dict[str, Any]]]:
    """Every method's candidate knobs (tune_iso.settings over GRID; the ablations over the same
    grid, uniform φ only where it differs: α)."""
    phi_grid = settings(GRID)
    return {
        "iso_p1": [{**s, "p": 1.0} for s in phi_grid],
        "iso_p0": [{**s, "p": 0.0} for s in phi_grid],
        "iso_uniform": [{"alpha": a, "phi_mode": "uniform"} for a in GRID["alpha"]],
        "iso_shuffled": [{**s, "p": 1.0, "phi_mode": "shuffled"} for s in phi_grid],
        "iso_random": [{"alpha": a, "beta": b, "phi_mode": "random"} for a in GRID["alpha"] for b in GRID["beta"]],
        "ppr": settings(PPR_GRID),
    }


@dataclass
class Prepared:
    inputs: EvaluationInputs
    k: int
    seconds: float


def prepare(dataset: str, level: Level, split: str, overrides: list[str]) -> Prepared:
    start = time.perf_counter()
    inputs, k = evaluation(f"dataset={dataset}", f"split={split}", *level.overrides, *overrides)  # the graph's index, f_θ trained on it (and cached)
    return Prepared(inputs, k, time.perf_counter() - start)


def rcfg_for(family: str, knobs: dict[str, Any], level: Level):
    name = "ppr" if family == "ppr" else ("dense" if family == "dense" else "iso")
    return retriever_config(name, **({} if name == "dense" else {**level.retriever, **knobs}))


def run(prep: Prepared, family: str, knobs: dict[str, Any], level: Level):
    return make_retriever(prep.inputs, rcfg_for(family, knobs, level)).retrieve(prep.inputs.queries, prep.k)


def rule_beta(prep: Prepared, knobs: dict[str, Any]) -> dict[str, float]:
    """:func:`beta_rule` on this graph, with φ as the retriever with ``knobs`` computes it."""
    index = prep.inputs.index
    log_phi = index.log_phi_for(index.phi.replace(**{k: float(knobs[k]) for k in ("p", "eps", "shell_floor") if k in knobs}))
    return beta_rule(index.graph.edge_index, log_phi)


def tune(prep: Prepared, level: Level, grid: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Training-question Recall@5 of every candidate of every family."""
    scores: dict[str, list[float]] = {}
    for family, candidates in grid.items():
        scores[family] = []
        for knobs in candidates:
            result = run(prep, family, knobs, level)
            scores[family].append(float(per_question_recall(result.indices, prep.inputs.gold, 5).double().mean()))
    return scores


def best_index(values: list[float]) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))  # first best in grid order


def robust_default(train: dict[tuple[str, str], dict[str, list[float]]], grid: dict[str, list[dict]], datasets: list[str], levels: list[str]) -> dict[str, Any]:
    """The real-φ setting (p = 1 or 0) with the best mean training Recall@5 over datasets and levels,
    among those within CLEAN_COST of uniform φ (same α) on every dataset's clean training graph."""
    candidates = [("iso_p1", i) for i in range(len(grid["iso_p1"]))] + [("iso_p0", i) for i in range(len(grid["iso_p0"]))]
    uniform_alpha = {s["alpha"]: i for i, s in enumerate(grid["iso_uniform"])}
    rows = []
    for family, i in candidates:
        knobs = grid[family][i]
        per_level = {lv: sum(train[(d, lv)][family][i] for d in datasets) / len(datasets) for lv in levels}
        clean_cost = None
        if "clean" in levels:
            clean_cost = max(train[(d, "clean")]["iso_uniform"][uniform_alpha[knobs["alpha"]]] - train[(d, "clean")][family][i] for d in datasets)
        rows.append({"knobs": knobs, "mean_recall@5": sum(per_level.values()) / len(per_level), "per_level": per_level, "clean_cost": clean_cost})
    feasible = [r for r in rows if r["clean_cost"] is None or r["clean_cost"] <= CLEAN_COST + 1e-12] or rows
    best = max(feasible, key=lambda r: r["mean_recall@5"])  # first best on ties
    return {"knobs": best["knobs"], "mean_train_recall@5": best["mean_recall@5"], "per_level_train_recall@5": best["per_level"],
            "clean_cost_vs_uniform": best["clean_cost"], "feasible": len(feasible), "candidates": len(rows)}


def train_stage(dataset: str, levels: list[str], grid: dict[str, list[dict]], overrides: list[str], started: float,
                save: bool = False) -> dict[str, Any]:
    """Tuning on the training questions at every level: every candidate's Recall@5 and the graph's
    statistics. ``save``: after every level, into noise_train_<dataset>.json (other levels already
    there with the same grid are kept)."""
    out = {}
    if save and stage_path("train", dataset).is_file():
        previous = json.loads(stage_path("train", dataset).read_text())
        out = previous["levels"] if previous.get("train_settings") == grid else {}
    for name in levels:
        prep = prepare(dataset, LEVELS[name], "train", overrides)
        out[name] = {"overrides": list(LEVELS[name].overrides), "questions": len(prep.inputs.queries), "graph": prep.inputs.index.statistics,
                     "scores": tune(prep, LEVELS[name], grid)}
        print(f"[{time.perf_counter() - started:6.0f}s] tuned {dataset} / {name} on {out[name]['questions']} training questions", flush=True)
        if save:
            write_json(stage_path("train", dataset).name, {"train_settings": grid, "levels": out})
    return out


def beta_alone(scores: dict[str, list[float]], grid: dict[str, list[dict]], base: dict[str, Any]) -> tuple[str, int] | None:
    """The candidate with the best β among those whose other knobs are ``base``'s (the β that the
    β rule stands in for): its family and index; ``None`` when the grid has no such candidates."""
    family = "iso_p0" if base.get("p", 1.0) == 0 else "iso_p1"
    same = [i for i, c in enumerate(grid[family]) if all(c[k] == base[k] for k in c if k != "beta")]
    return (family, max(same, key=lambda i: (scores[family][i], -i))) if same else None


def dev_stage(dataset: str, levels: list[str], train: dict[str, Any], grid: dict[str, list[dict]], robust: dict[str, Any],
              overrides: list[str], started: float) -> list[dict[str, Any]]:
    """Every method on the dev questions (held out) with the knobs chosen on the training questions.
    The β rule and the β tuned alone run at the robust default's other knobs."""
    base = {**retriever_config("iso"), **robust["knobs"]}
    results = []
    for name in levels:
        level = LEVELS[name]
        scores = train[name]["scores"]
        tuned = {f: grid[f][best_index(v)] for f, v in scores.items()}
        # the β rule on the training graph too, scored on the training questions (next to the tuned β)
        train_prep = prepare(dataset, level, "train", overrides)
        train_rule = rule_beta(train_prep, base)
        train_rule_recall = float(per_question_recall(run(train_prep, "iso", {**robust["knobs"], "beta": train_rule["beta"]}, level).indices,
                                                      train_prep.inputs.gold, 5).double().mean())
        prep = prepare(dataset, level, "dev", overrides)
        rule = rule_beta(prep, base)
        alone = beta_alone(scores, grid, base)
        beta_tuned_alone = None if alone is None else grid[alone[0]][alone[1]]["beta"]
        plan: dict[str, tuple[str, dict[str, Any]]] = {"dense": ("dense", {})}
        plan.update({f"{f} (tuned)": (f, tuned[f]) for f in FAMILIES})
        plan.update({
            "ppr (fixed)": ("ppr", {}),
            "iso_p1 (fixed)": ("iso", {}),
            "iso_p0 (fixed)": ("iso", {"p": 0.0}),
            "iso_uniform (fixed)": ("iso", {"phi_mode": "uniform"}),
            "iso_shuffled (fixed)": ("iso", {"phi_mode": "shuffled"}),
            "iso_random (fixed)": ("iso", {"phi_mode": "random"}),
            "iso (robust default)": ("iso", robust["knobs"]),
            "iso (robust default, p = 1)": ("iso", {**robust["knobs"], "p": 1.0}),
            "iso_uniform (robust default)": ("iso", {**robust["knobs"], "phi_mode": "uniform"}),
            "iso (beta rule)": ("iso", {**robust["knobs"], "beta": rule["beta"]}),
        })
        if beta_tuned_alone is not None:
            plan["iso (beta tuned alone)"] = ("iso", {**robust["knobs"], "beta": beta_tuned_alone})
        if level.retriever.get("edge_weights"):  # the same tuned knobs without the weights: what the weights add
            plan["ppr (tuned, unweighted)"] = ("ppr", {**tuned["ppr"], "edge_weights": False})
            plan["iso_p1 (tuned, unweighted)"] = ("iso_p1", {**tuned["iso_p1"], "edge_weights": False})
        metrics = {label: retrieval_metrics(run(prep, family, knobs, level).indices, prep.inputs.gold) for label, (family, knobs) in plan.items()}
        results.append({
            "dataset": dataset, "level": name, "kind": level.kind, "overrides": list(level.overrides), "retriever_knobs": level.retriever,
            "n_dev_questions": len(prep.inputs.queries), "n_train_questions": train[name]["questions"],
            "graph_dev": prep.inputs.index.statistics, "graph_train": train[name]["graph"],
            "beta_rule_dev": rule, "beta_rule_train": train_rule, "beta_tuned_alone": beta_tuned_alone,
            "train_recall@5": {**{f: max(v) for f, v in scores.items()}, "iso (beta rule)": train_rule_recall,
                               "iso (beta tuned alone)": None if alone is None else scores[alone[0]][alone[1]]},
            "tuned_knobs": tuned, "knobs": {label: knobs for label, (_, knobs) in plan.items()},
            "metrics": metrics,
        })
        print(f"[{time.perf_counter() - started:6.0f}s] dev {dataset} / {name}", flush=True)
    return results


def stage_path(stage: str, dataset: str) -> Path:
    return RESULTS / f"noise_{stage}_{dataset}.json"


def load_stage(stage: str, dataset: str, grid: dict[str, list[dict]], levels: list[str]) -> dict[str, Any]:
    path = stage_path(stage, dataset)
    try:
        payload = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"{path}: run --stage {stage} for {dataset} first ({err})") from None
    if payload.get("train_settings") != grid or not set(levels) <= set(payload["levels"]):
        raise SystemExit(f"{path} was written with another grid or without levels {sorted(set(levels) - set(payload['levels']))}: rerun --stage {stage}")
    return payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--levels", nargs="+", default=list(LEVELS), choices=list(LEVELS))
    parser.add_argument("--stage", choices=["all", "train", "dev", "report"], default="all",
                        help="all: everything in one process; or train (per dataset, noise_train_<dataset>.json), then dev (reads "
                             "every --datasets' training file to choose the robust default; noise_dev_<dataset>.json), then report")
    parser.add_argument("--robust-from", nargs="+", default=None, metavar="DATASET",
                        help="--stage dev: the datasets whose training files choose the robust default (default: --datasets)")
    add_override_argument(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)  # quality runs: one thread, so the shared machine's other jobs keep theirs
    grid = family_settings()
    started = time.perf_counter()
    train: dict[str, dict[str, Any]] = {}
    if args.stage in ("all", "train"):
        for dataset in args.datasets:
            train[dataset] = train_stage(dataset, args.levels, grid, args.override, started, save=args.stage == "train")
        if args.stage == "train":
            return
    elif args.stage == "dev":
        train = {d: load_stage("train", d, grid, args.levels)["levels"] for d in {*args.datasets, *(args.robust_from or [])}}
    if args.stage in ("all", "dev"):
        chooser = args.robust_from if args.stage == "dev" and args.robust_from else args.datasets
        robust = robust_default({(d, lv): train[d][lv]["scores"] for d in chooser for lv in args.levels}, grid, chooser, args.levels)
        robust["chosen_on"] = chooser
        print(f"robust default (training questions, all datasets and levels): {robust['knobs']}, mean R@5 {robust['mean_train_recall@5']:.4f}, "
              f"clean cost vs uniform {robust['clean_cost_vs_uniform']}", flush=True)
        dev = {d: dev_stage(d, args.levels, train[d], grid, robust, args.override, started) for d in args.datasets}
        if args.stage == "dev":
            for d in args.datasets:
                write_json(stage_path("dev", d).name, {"train_settings": grid, "levels": args.levels, "robust_default": robust, "results": dev[d]})
            return
    else:  # report
        stages = {d: load_stage("dev", d, grid, args.levels) for d in args.datasets}
        dev = {d: [r for r in stages[d]["results"] if r["level"] in args.levels] for d in args.datasets}
        robust = stages[args.datasets[0]]["robust_default"]
    results = [r for d in args.datasets for r in dev[d]]
    summary = summarise(results, args.datasets, args.levels)
    write_json("noise.json", {
        "protocol": "knobs tuned on the training questions (split=train, each over its own corpus, with the same noise arguments); "
                    "dev questions held out, never used for a choice",
        "levels": {k: {"overrides": list(v.overrides), "kind": v.kind, "retriever": v.retriever} for k, v in LEVELS.items() if k in args.levels},
        "grid": GRID, "ppr_grid": PPR_GRID, "train_settings": grid, "fixed_knobs": {**ISOKnobs().to_dict(), **retriever_config("iso")},
        "robust_default": robust, "results": results, "summary": summary, "seconds": time.perf_counter() - started,
    })
    plot(results, args.datasets, args.levels)


# (method, the PPR it is compared with, the uniform φ it is compared with): tuned against tuned,
# defaults against defaults (the robust default against uniform φ at its own knobs)
COMPARISONS = {
    "tuned": ("iso_p1 (tuned)", "ppr (tuned)", "iso_uniform (tuned)"),
    "tuned_p0": ("iso_p0 (tuned)", "ppr (tuned)", "iso_uniform (tuned)"),
    "robust": ("iso (robust default)", "ppr (fixed)", "iso_uniform (robust default)"),
    "fixed": ("iso_p1 (fixed)", "ppr (fixed)", "iso_uniform (fixed)"),
}


def summarise(results: list[dict], datasets: list[str], levels: list[str]) -> dict[str, Any]:
    """Tables, shares won back, p = 1 against p = 0, and the issue's target checks."""
    r5 = {(r["dataset"], r["level"]): {m: v["recall@5"] for m, v in r["metrics"].items()} for r in results}
    r10 = {(r["dataset"], r["level"]): {m: v["recall@10"] for m, v in r["metrics"].items()} for r in results}
    methods = list(dict.fromkeys(m for r in results for m in r["metrics"]))
    cell = lambda d, lv, m: f"{r5[(d, lv)][m]:.3f} / {r10[(d, lv)][m]:.3f}" if m in r5[(d, lv)] else "-"
    for dataset in datasets:
        print(f"\n{dataset}: dev Recall@5 / Recall@10 (held out)")
        print(f"  {'method':30s}" + "".join(f"{lv:>16s}" for lv in levels))
        for m in methods:
            print(f"  {m:30s}" + "".join(f"{cell(dataset, lv, m):>16s}" for lv in levels))
    out: dict[str, Any] = {"won_back": {}, "p1_minus_p0": {}, "targets": {}}
    for dataset in datasets:
        if "clean" not in levels:
            break
        clean = r5[(dataset, "clean")]
        for lv in levels:
            if lv == "clean":
                continue
            noisy = r5[(dataset, lv)]
            row = {}
            for key, (label, ppr_label, uni_label) in COMPARISONS.items():
                real, ppr, uni = noisy[label], noisy[ppr_label], noisy[uni_label]
                lost_ppr, lost_uni = clean[ppr_label] - ppr, clean[uni_label] - uni
                row[key] = {
                    "ppr_loss": lost_ppr, "uniform_loss": lost_uni,
                    "won_back_vs_ppr": (real - ppr) / lost_ppr if lost_ppr > 0 else None,
                    "won_back_vs_uniform": (real - uni) / lost_uni if lost_uni > 0 else None,
                    "real_minus_ppr": real - ppr, "real_minus_uniform": real - uni,
                }
            out["won_back"][f"{dataset}/{lv}"] = row
            out["p1_minus_p0"][f"{dataset}/{lv}"] = {"tuned": noisy["iso_p1 (tuned)"] - noisy["iso_p0 (tuned)"],
                                                     "fixed": noisy["iso_p1 (fixed)"] - noisy["iso_p0 (fixed)"],
                                                     "robust": noisy["iso (robust default, p = 1)"] - noisy["iso (robust default)"]
                                                     if "iso (robust default, p = 1)" in noisy else None}
        # the target: under hub noise that costs PPR >= 5 points, real φ recovers >= 2/3 of PPR's loss
        # and beats PPR by >= 5 points; on the clean graph it is within 0.5 points of uniform φ
        for key, (label, ppr_label, uni_label) in COMPARISONS.items():
            checks = {"method": label, "clean_cost_vs_uniform": clean[uni_label] - clean[label],
                      "clean_ok": clean[label] >= clean[uni_label] - 0.005, "levels": {}}
            for lv in levels:
                if LEVELS[lv].kind != "hubs":
                    continue
                noisy = r5[(dataset, lv)]
                loss = clean[ppr_label] - noisy[ppr_label]
                recovered = (noisy[label] - noisy[ppr_label]) / loss if loss > 0 else None
                checks["levels"][lv] = {"ppr_loss": loss, "recovered_share": recovered, "beats_ppr_by": noisy[label] - noisy[ppr_label],
                                        "applies": loss >= 0.05,
                                        "met": loss >= 0.05 and recovered is not None and recovered >= 2 / 3 and noisy[label] - noisy[ppr_label] >= 0.05}
            out["targets"][f"{dataset}/{key}"] = checks
    fmt = lambda v: "  n/a" if v is None else f"{v:5.2f}"
    print("\nshare of the noise's Recall@5 loss won back, against PPR / against uniform φ (the method, PPR and uniform φ as in COMPARISONS):")
    for key, row in out["won_back"].items():
        print(f"  {key}")
        for k, v in row.items():
            print(f"    {k:9s} PPR loss {v['ppr_loss']:+.3f}, won back {fmt(v['won_back_vs_ppr'])}; uniform loss {v['uniform_loss']:+.3f}, "
                  f"won back {fmt(v['won_back_vs_uniform'])}; real - PPR {v['real_minus_ppr']:+.3f}, real - uniform {v['real_minus_uniform']:+.3f}")
    print("\nreal φ p = 1 minus p = 0 (dev Recall@5), tuned | fixed | robust knobs:")
    for key, row in out["p1_minus_p0"].items():
        print(f"  {key:34s} {row['tuned']:+.3f} | {row['fixed']:+.3f} | " + ("n/a" if row["robust"] is None else f"{row['robust']:+.3f}"))
    print("\ntarget (hub noise costing PPR >= 5 points: recover >= 2/3 and beat PPR by >= 5 points; clean within 0.5 of uniform):")
    for key, checks in out["targets"].items():
        hubs = ", ".join(f"{lv}: PPR loss {c['ppr_loss']:+.3f}, recovered {fmt(c['recovered_share'])}, "
                         f"{c['beats_ppr_by']:+.3f} over PPR{' MET' if c['met'] else (' not met' if c['applies'] else ' (loss < 5 points)')}"
                         for lv, c in checks["levels"].items())
        print(f"  {key:26s} clean cost {checks['clean_cost_vs_uniform']:+.4f} ({'ok' if checks['clean_ok'] else 'NOT ok'}); {hubs}")
    return out


def plot(results: list[dict], datasets: list[str], levels: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r5 = {(r["dataset"], r["level"]): {m: v["recall@5"] for m, v in r["metrics"].items()} for r in results}
    styles = {"dense": ("grey", ":"), "ppr (tuned)": ("tab:red", "-"), "iso_p1 (tuned)": ("tab:blue", "-"), "iso_p0 (tuned)": ("tab:cyan", "-"),
              "iso_uniform (tuned)": ("tab:orange", "-"), "iso_shuffled (tuned)": ("tab:purple", "-"), "iso_random (tuned)": ("tab:brown", "-"),
              "ppr (fixed)": ("tab:red", "--"), "iso_p1 (fixed)": ("tab:blue", "--"), "iso (robust default)": ("black", "-"),
              "iso (beta rule)": ("tab:green", "-.")}
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4.2), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        for method, (color, line) in styles.items():
            ax.plot(range(len(levels)), [r5[(dataset, lv)][method] for lv in levels], line, color=color, marker="o", ms=3, label=method)
        ax.set_xticks(range(len(levels)), levels, rotation=45, ha="right", fontsize=7)
        ax.set_title(f"{dataset} dev (held out)")
        ax.set_ylabel("Recall@5")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / "noise.png", dpi=120)
    print(f"wrote {RESULTS / 'noise.png'}")


if __name__ == "__main__":
    main()
