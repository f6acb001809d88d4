"""Retrieval quality on the shared dev sets: ISO-RAG against flat dense, BM25, global PPR, HippoRAG 2's walk and
the φ ablations.

    python -m benchmarks.quality [--datasets musique hotpotqa 2wikimultihopqa] [--graphs leakfree title_mention context_cooccurrence]
    python -m benchmarks.quality --per-dataset-knobs benchmarks/results/tuning_round3_train.json --graphs title_mention
    python -m benchmarks.quality --tuned-on-dev --graphs title_mention --ablation-seeds 5

Knobs: by default conf/retriever/iso.yaml's, which are the library's defaults on these graphs (tuned on the training questions by
tune_iso.py); with ``--per-dataset-knobs TUNING_JSON`` every ISO-RAG variant (and its φ
ablations) takes, per dataset, the best real-φ setting in a tune_iso.py output (first best in
grid order; the JSON records which questions that was chosen on); with ``--tuned-on-dev`` ISO-RAG and its ablations use conf/retriever/iso_dev_<dataset>.yaml
and global PPR is also run as conf/retriever/ppr_dev_<dataset>.yaml: knobs chosen on these same
dev questions, so those scores are IN-SAMPLE (tune_iso.py's cross-validation says how much of it
is selection). ``--ablation-seeds N`` runs the shuffled and random φ ablations with seeds 0..N-1,
and real φ must beat every one of them. Every run also reports ISO-RAG with the other volume
exponent: ``iso_p1`` (f_θ's hyperbolic volumes) when the knobs use p = 0 (node counts, the
default), ``iso_p0`` when they use p > 0: the control for the hyperbolic geometry.

``context_cooccurrence`` builds the graph from the evaluated questions' own contexts: it is
reported separately, labelled LEAK, and is not a held-out result. Writes
benchmarks/results/quality.json, quality_<tuning file stem>.json or quality_dev_tuned.json.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from benchmarks.common import (
    add_override_argument,
    best_rows,
    evaluation,
    has_retriever_config,
    make_retriever,
    retriever_config,
    write_json,
)
from isorag_pyg.evaluation import evaluate_retrievers
from isorag_pyg.graph import EmptyGraphError

BASELINES = ["dense", "bm25", "ppr", "hipporag"]
ABLATIONS = ["uniform", "shuffled", "random"]


def tuned_knobs(path: Path) -> tuple[dict[str, dict], str]:
    """Per dataset, the knobs of the best real-φ ISO-RAG setting in a tune_iso.py output, and
    that output's tuning protocol."""
    try:
        tuning = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"{path}: cannot read a tune_iso.py output ({err})") from None
    if not isinstance(tuning, dict) or "grid" not in tuning or "rows" not in tuning:
        raise SystemExit(f"{path}: not a benchmarks/tune_iso.py output (needs 'grid' and 'rows')")
    keys = [k for k in tuning["grid"] if k != "phi_mode"]
    knobs = {dataset: {k: row[k] for k in keys} for dataset, row in best_rows(tuning["rows"]).items()}
    return knobs, tuning.get("protocol", "unknown")


def retrievers(dataset: str, knobs: dict, tuned_on_dev: bool, ablation_seeds: int) -> dict[str, dict]:
    """Label -> retriever config: ISO-RAG, the baselines, then the φ ablations of ISO-RAG."""
    iso_name = f"iso_dev_{dataset}" if tuned_on_dev else "iso"
    plan = {"iso": retriever_config(iso_name, **knobs), "iso_no_bridges": retriever_config(iso_name, **{**knobs, "bridge_share": 0.0})}
    plan.update({name: retriever_config(name) for name in BASELINES})
    if tuned_on_dev:
        plan["ppr_dev"] = retriever_config(f"ppr_dev_{dataset}")
    for mode in ABLATIONS:
        for seed in range(1 if mode == "uniform" else ablation_seeds):
            label = f"iso_{mode}" + (f"_seed{seed}" if seed else "")
            plan[label] = retriever_config(iso_name, **knobs, phi_mode=mode, seed=seed)
    other_p = 1.0 if float(plan["iso"].get("p", 0.0)) == 0.0 else 0.0  # the other φ: hyperbolic volumes or node counts
    plan[f"iso_p{other_p:g}"] = retriever_config(iso_name, **{**knobs, "p": other_p})
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=["leakfree", "title_mention", "context_cooccurrence"])
    knob_source = parser.add_mutually_exclusive_group()
    knob_source.add_argument("--per-dataset-knobs", type=Path, default=None, help="a tune_iso.py JSON: each dataset's best setting there")
    knob_source.add_argument("--tuned-on-dev", action="store_true", help="conf/retriever/iso_dev_<dataset>.yaml and ppr_dev_<dataset>.yaml (in-sample)")
    parser.add_argument("--ablation-seeds", type=int, default=1, help="seeds 0..N-1 of the shuffled and random φ ablations")
    add_override_argument(parser)
    args = parser.parse_args()
    if args.ablation_seeds < 1:
        raise SystemExit("--ablation-seeds must be >= 1")
    knobs, protocol = tuned_knobs(args.per_dataset_knobs) if args.per_dataset_knobs else ({}, "")
    if args.per_dataset_knobs and (missing := [d for d in args.datasets if d not in knobs]):
        raise SystemExit(f"{args.per_dataset_knobs} has no ISO-RAG setting for {', '.join(missing)} (it covers {', '.join(knobs) or 'nothing'})")
    if args.tuned_on_dev and (missing := [d for d in args.datasets if not has_retriever_config(f"iso_dev_{d}")]):
        raise SystemExit(f"no dev-tuned knobs recorded for {', '.join(missing)} (conf/retriever/iso_dev_<dataset>.yaml)")
    logging.basicConfig(level=logging.WARNING)
    results = []
    for dataset in args.datasets:
        for graph in args.graphs:
            try:
                inputs, k = evaluation(f"dataset={dataset}", f"graph={graph}", *args.override)
            except EmptyGraphError:
                print(f"\n{dataset} / {graph}: no edges (the question file carries no contexts); skipped", flush=True)
                results.append({"dataset": dataset, "graph": graph, "skipped": "graph has no edges"})
                continue
            plan = {label: make_retriever(inputs, rcfg) for label, rcfg in retrievers(dataset, knobs.get(dataset, {}), args.tuned_on_dev, args.ablation_seeds).items()}
            runs = evaluate_retrievers(plan, inputs.queries, inputs.gold, k)
            scores = {label: {key: run.metrics[key] for key in ("recall@5", "precision@5", "recall@10", "precision@10")} for label, run in runs.items()}
            results.append(summarise(dataset, graph, inputs, scores))
    if args.tuned_on_dev:
        write_json("quality_dev_tuned.json", {"split": "dev", "knobs": "conf/retriever/iso_dev_<dataset>.yaml and ppr_dev_<dataset>.yaml, "
                                              "tuned on these same dev questions (tuning_round4_dev.json): IN-SAMPLE", "results": results})
    elif knobs:
        write_json(f"quality_{args.per_dataset_knobs.stem}.json", {"split": "dev", "knobs": f"per dataset, best in {args.per_dataset_knobs.name} ({protocol})",
                                                                  "per_dataset_knobs": knobs, "results": results})
    else:
        write_json("quality.json", {"split": "dev", "knobs": "conf/retriever/iso.yaml (tuned on training questions)", "results": results})


def summarise(dataset: str, graph: str, inputs, scores: dict[str, dict[str, float]]) -> dict:
    """The bar's checks for one dataset and graph, printed as a table."""
    r5 = {label: m["recall@5"] for label, m in scores.items()}
    iso, ppr_labels = r5["iso"], [label for label in r5 if label.startswith("ppr")]
    ablations = [label for label in r5 if label.startswith(tuple(f"iso_{mode}" for mode in ABLATIONS))]
    entry = {
        "dataset": dataset, "graph": graph, "builders": inputs.index.statistics["builders"], "leak": inputs.index.leak,
        "n_questions": len(inputs.queries), "metrics": scores,
        "iso_beats_dense_r5": iso > r5["dense"], "iso_beats_ppr_r5": all(iso > r5[p] for p in ppr_labels),
        "real_phi_beats_ablations_r5": all(iso > r5[a] for a in ablations),
        "iso_beats_other_phi_exponent_r5": all(iso > r5[label] for label in ("iso_p0", "iso_p1") if label in r5),
    }
    label = "LEAK " if entry["leak"] else ""
    print(f"\n{dataset} / {graph} {label}({entry['n_questions']} dev questions)")
    print(f"  {'retriever':20s} {'R@5':>6s} {'R@10':>6s} {'P@5':>6s} {'P@10':>6s}")
    for name, m in scores.items():
        print(f"  {name:20s} {m['recall@5']:6.3f} {m['recall@10']:6.3f} {m['precision@5']:6.3f} {m['precision@10']:6.3f}")
    best_ppr = max(r5[p] for p in ppr_labels)
    print(f"  ISO/dense R@5 ratio {iso / r5['dense']:.3f}, ISO/best PPR {iso / best_ppr:.3f}; "
          f"real φ beats every ablation: {entry['real_phi_beats_ablations_r5']}", flush=True)
    return entry


if __name__ == "__main__":
    main()
