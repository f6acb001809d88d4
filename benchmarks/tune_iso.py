"""Tune ISO-RAG's knobs on the TRAINING questions of each shared dataset (split=train, each over
its own corpus), never on the dev questions that the quality benchmark reports.

    python benchmarks/tune_iso.py [--datasets musique hotpotqa 2wikimultihopqa] [--graphs leakfree title_mention] [--grid round2|round3]

Prints the best settings by mean Recall@5 over the datasets and writes
benchmarks/results/tuning.json (round 2, whose choice is recorded in conf/retriever/iso.yaml) or
tuning_round3.json.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import tempfile
from pathlib import Path

from _common import best_iso_rows, eval_config, retriever_config, write_json

from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.evaluation.runner import ball_provider, prepare_evaluation
from isorag_pyg.retrieval.factory import build_retriever

# Round 1 (results/tuning_round1.json: graphs leakfree and title_mention, hops 1-2, shell_floor 0) found
# title_mention best, hops=2 no better than 1, and pruning costly because empty 2-hop shells give φ = 0;
# round 2 (results/tuning.json, the knobs in conf/retriever/iso.yaml) adds shell_floor; round 3
# (results/tuning_round3.json) keeps round 2's φ (p=1, shell_floor=8, lambda_graph=0.9) and searches
# the candidate set (hops, hub cap, over-retrieval) with β, α and the uniform-φ control, per dataset.
GRIDS = {
    "round2": ("tuning.json", {
        "alpha": [0.5, 0.85],
        "lambda_graph": [0.5, 0.9],
        "beta": [0.01, 0.05, 0.1, 0.3],
        "p": [1.0, 4.0],
        "shell_floor": [0.0, 1.0, 8.0],
    }),
    "round3": ("tuning_round3.json", {
        "hops": [1, 2],
        "max_expansion": [30, 100],
        "over_retrieval": [2.0, 5.0],
        "alpha": [0.5, 0.85],
        "beta": [0.01, 0.05, 0.1, 0.2],
        "phi_mode": ["real", "uniform"],
    }),
}


def print_best_per_dataset(rows: list[dict], keys: list[str]) -> None:
    """Each dataset's best setting on its training questions, against global PPR there."""
    for dataset, best in best_iso_rows(rows).items():
        ppr = next(r["recall@5"] for r in rows if r["dataset"] == dataset and r["retriever"] == "ppr")
        print(f"  {dataset}: best ISO-RAG {best['recall@5']:.4f} (global PPR {ppr:.4f}, ratio {best['recall@5'] / ppr:.3f}) at "
              + " ".join(f"{k}={best[k]}" for k in keys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=["title_mention"])
    parser.add_argument("--grid", choices=list(GRIDS), default="round2")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out_name, grid = GRIDS[args.grid]
    keys = list(grid)
    rows = []
    for dataset in args.datasets:
        for graph in args.graphs:
            cfg = eval_config(f"dataset={dataset}", f"graph={graph}", "split=train")
            inputs = prepare_evaluation(cfg)
            ball = ball_provider(cfg, inputs.bundle, Path(tempfile.mkdtemp()))
            for name in ("dense", "ppr"):
                result = build_retriever(retriever_config(name), inputs.bundle, ball).retrieve(inputs.queries, cfg.k)
                rows.append({"dataset": dataset, "graph": graph, "retriever": name, **retrieval_metrics(result.indices, inputs.gold)})
            for values in itertools.product(*grid.values()):
                setting = dict(zip(keys, values))
                if setting.get("phi_mode", "real") != "real" and setting["beta"] != min(grid["beta"]):
                    continue  # uniform φ prunes nothing: one β is enough
                coupled = {"lambda_dense": 1.0 - setting["lambda_graph"]} if "lambda_graph" in setting else {}
                rcfg = retriever_config("iso", **setting, **coupled)
                result = build_retriever(rcfg, inputs.bundle, ball).retrieve(inputs.queries, cfg.k)
                rows.append({"dataset": dataset, "graph": graph, "retriever": "iso", **setting,
                             **retrieval_metrics(result.indices, inputs.gold)})
            print(f"{dataset}/{graph}: {len(inputs.queries)} training questions done", flush=True)
    by_setting: dict[tuple, list[float]] = {}
    for row in rows:
        if row["retriever"] == "iso":
            by_setting.setdefault((row["graph"], *(row[k] for k in keys)), []).append(row["recall@5"])
    ranked = sorted(((sum(v) / len(v), k) for k, v in by_setting.items() if len(v) == len(args.datasets)), reverse=True)
    print("best settings by mean recall@5 on the training questions:")
    for score, setting in ranked[:10]:
        print(f"  {score:.4f}  graph={setting[0]} " + " ".join(f"{k}={v}" for k, v in zip(keys, setting[1:])))
    for graph in args.graphs:
        for name in ("dense", "ppr"):
            vals = [r["recall@5"] for r in rows if r["graph"] == graph and r["retriever"] == name]
            print(f"  baseline {name:5s} graph={graph}: {sum(vals) / len(vals):.4f}")
    print("best setting per dataset on its training questions:")
    print_best_per_dataset(rows, keys)
    best = ranked[0][1]
    write_json(out_name, {"protocol": "split=train (training questions over their own corpus); dev untouched",
                          "grid": grid, "best": {"graph": best[0], **dict(zip(keys, best[1:]))}, "rows": rows})


if __name__ == "__main__":
    main()
