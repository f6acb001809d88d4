"""Tune ISO-RAG's knobs, and global PPR's, on one split of each shared dataset.

    python -m benchmarks.tune_iso [--split train|dev] [--grid round2|round3|round4] [--datasets ...] [--graphs title_mention ...]

``--split train`` (the default) tunes on the TRAINING questions (each over its own corpus), never
on the dev questions that benchmarks/quality.py reports (writes tuning_<grid>_train.json). ``--split dev`` tunes on the dev questions
themselves and writes tuning_<grid>_dev.json: its best scores are IN-SAMPLE
(chosen on the questions they are measured on). To show how much of them is selection, every run
also reports a repeated 2-fold cross-validation of the same selection (choose on half the
questions, score on the other half) for ISO-RAG with real φ, ISO-RAG with uniform φ and global PPR.
The best settings per dataset of the dev run are recorded in conf/retriever/iso_dev_<dataset>.yaml
and ppr_dev_<dataset>.yaml (tests/test_tuned_configs.py checks that they match).
"""
from __future__ import annotations

import argparse
import logging
from typing import Any

from benchmarks.common import (
    PPR_GRID,
    add_override_argument,
    best_rows,
    evaluation,
    make_retriever,
    retriever_config,
    settings,
    write_json,
)
from isorag_pyg.evaluation import (
    cross_validated_selection,
    per_question_recall,
    retrieval_metrics,
)

# The grids: round 2 searches β and α with the uniform-φ control; round 3 keeps round 2's φ (p=1,
# shell_floor=8, lambda_graph=0.9) and searches the candidate set (hops, hub cap, over-retrieval) with
# β, α and the uniform-φ control, per dataset; round 4 searches the candidate set and φ (p,
# shell_floor, β) together.
GRIDS = {
    "round2": {
        "alpha": [0.5, 0.85],
        "lambda_graph": [0.5, 0.9],
        "beta": [0.01, 0.05, 0.1, 0.3],
        "p": [1.0, 4.0],
        "shell_floor": [0.0, 1.0, 8.0],
    },
    "round3": {
        "p": [1.0],
        "hops": [1, 2],
        "max_expansion": [30, 100],
        "over_retrieval": [2.0, 5.0],
        "alpha": [0.5, 0.85],
        "beta": [0.01, 0.05, 0.1, 0.2],
        "phi_mode": ["real", "uniform"],
    },
    "round4": {
        "alpha": [0.5, 0.85],
        "over_retrieval": [2.0, 5.0],
        "hops": [1, 2],
        "max_expansion": [30, 100],
        "p": [1.0, 4.0],
        "shell_floor": [0.0, 8.0],
        "beta": [0.01, 0.05, 0.1, 0.2, 0.3, 0.5],
        "phi_mode": ["real", "uniform"],
    },
    # the embedded synthetic corpus's own knobs (conf/dataset/synthetic.yaml), tuned on its training questions
    "synthetic": {
        "alpha": [0.5, 0.85],
        "hops": [1, 2],
        "p": [0.0, 1.0],
        "beta": [0.01, 0.05, 0.1, 0.2, 0.3, 0.4],
        "phi_mode": ["real", "uniform"],
    },
}
def cross_validation(rows: list[dict], recalls: list) -> dict[str, dict[str, float]]:
    """Held-out (2-fold, 3 repeats) against in-sample Recall@5 of each family's selection."""
    families = {
        "iso": lambda r: r["retriever"] == "iso" and r.get("phi_mode", "real") == "real",
        "iso_uniform": lambda r: r["retriever"] == "iso" and r.get("phi_mode") == "uniform",
        "ppr": lambda r: r["retriever"] == "ppr",
    }
    out = {}
    for family, member in families.items():
        scores = {i: recalls[i] for i, row in enumerate(rows) if member(row)}
        if scores:
            out[family] = cross_validated_selection(scores, folds=2, repeats=3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=["title_mention"])
    parser.add_argument("--grid", choices=list(GRIDS), default="round2")
    parser.add_argument("--split", choices=["train", "dev"], default="train")
    add_override_argument(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    grid = GRIDS[args.grid]
    keys = list(grid)
    rows, cv = [], {}
    for dataset in args.datasets:
        for graph in args.graphs:
            inputs, k = evaluation(f"dataset={dataset}", f"graph={graph}", f"split={args.split}", *args.override)
            runs: list[tuple[str, dict[str, Any]]] = [("dense", {})]
            runs += [("ppr", setting) for setting in settings(PPR_GRID)]
            runs += [("iso", setting) for setting in settings(grid)]
            here, recalls = [], []
            for name, setting in runs:
                result = make_retriever(inputs, retriever_config(name, **setting)).retrieve(inputs.queries, k)
                here.append({"dataset": dataset, "graph": graph, "retriever": name, **setting, **retrieval_metrics(result.indices, inputs.gold)})
                recalls.append(per_question_recall(result.indices, inputs.gold, 5))
            rows += here
            cv[f"{dataset}/{graph}"] = cross_validation(here, recalls)
            print(f"{dataset}/{graph}: {len(inputs.queries)} {args.split} questions done", flush=True)
    report(rows, keys, args, cv)


def report(rows: list[dict], keys: list[str], args: argparse.Namespace, cv: dict) -> None:
    by_setting: dict[tuple, list[float]] = {}
    for row in rows:
        if row["retriever"] == "iso":
            by_setting.setdefault((row["graph"], *(row.get(k) for k in keys)), []).append(row["recall@5"])
    ranked = sorted(((sum(v) / len(v), k) for k, v in by_setting.items() if len(v) == len(args.datasets)), key=lambda t: -t[0])
    print(f"best settings by mean recall@5 on the {args.split} questions:")
    for score, setting in ranked[:10]:
        print(f"  {score:.4f}  graph={setting[0]} " + " ".join(f"{k}={v}" for k, v in zip(keys, setting[1:])))
    print(f"best setting per dataset on its {args.split} questions (in-sample), and its 2-fold cross-validated (held-out) Recall@5:")
    ppr_best, iso_best = best_rows(rows, "ppr"), best_rows(rows)
    for dataset, best in iso_best.items():
        ppr = ppr_best[dataset]
        print(f"  {dataset}: ISO-RAG {best['recall@5']:.4f} at " + " ".join(f"{k}={best[k]}" for k in keys if k != "phi_mode")
              + f"; global PPR {ppr['recall@5']:.4f} at alpha={ppr['alpha']} lambda_graph={ppr['lambda_graph']}")
        for family, value in cv[f"{dataset}/{best['graph']}"].items():
            print(f"      {family:12s} in-sample {value['in_sample']:.4f}  held-out {value['held_out']:.4f}")
    best = ranked[0][1]
    in_sample = args.split == "dev"
    protocol = ("split=dev: tuned on the dev questions themselves; best scores are IN-SAMPLE, see cross_validation for held-out"
                if in_sample else "split=train (training questions over their own corpus); dev untouched")
    name = f"tuning_{args.grid}_{args.split}.json"
    write_json(name, {"protocol": protocol, "split": args.split, "grid": GRIDS[args.grid], "ppr_grid": PPR_GRID,
                      "best": {"graph": best[0], **dict(zip(keys, best[1:]))},
                      "best_per_dataset": {d: {"iso": r, "ppr": ppr_best[d]} for d, r in iso_best.items()},
                      "cross_validation": cv, "rows": rows})


if __name__ == "__main__":
    main()
