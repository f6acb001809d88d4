"""Retrieval quality on the shared dev sets: ISO-RAG against flat dense, BM25, global PPR and
the φ ablations, with the knobs in conf/ (tuned on the training questions by tune_iso.py).

    python benchmarks/quality.py [--datasets musique hotpotqa 2wikimultihopqa] [--graphs leakfree title_mention context_cooccurrence]
    python benchmarks/quality.py --per-dataset-knobs benchmarks/results/tuning_round3.json --graphs title_mention

``context_cooccurrence`` builds the graph from the evaluated questions' own contexts: it is
reported separately, labelled LEAK, and is not a held-out result. Writes
benchmarks/results/quality.json. With ``--per-dataset-knobs TUNING_JSON`` every ISO-RAG variant
(and its φ ablations) takes, per dataset, the setting that scored best on that dataset's training
questions in a tune_iso.py output (first best in grid order, real φ), and the results go to
quality_<tuning file stem>.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from _common import best_iso_rows, eval_config, retriever_config, write_json

from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.evaluation.runner import ball_provider, prepare_evaluation
from isorag_pyg.retrieval.factory import build_retriever

RETRIEVERS = ["iso", "dense", "bm25", "ppr", "iso_uniform", "iso_shuffled", "iso_random"]
ABLATIONS = ["iso_uniform", "iso_shuffled", "iso_random"]


def best_training_knobs(path: Path) -> dict[str, dict]:
    """Per dataset, the knobs of the best real-φ ISO-RAG setting in a tune_iso.py output."""
    tuning = json.loads(path.read_text())
    if not isinstance(tuning, dict) or "grid" not in tuning or "rows" not in tuning:
        raise SystemExit(f"{path}: not a benchmarks/tune_iso.py output (needs 'grid' and 'rows')")
    keys = [k for k in tuning["grid"] if k != "phi_mode"]
    return {dataset: {k: row[k] for k in keys} for dataset, row in best_iso_rows(tuning["rows"]).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=["leakfree", "title_mention", "context_cooccurrence"])
    parser.add_argument("--per-dataset-knobs", type=Path, default=None, help="a tune_iso.py JSON: each dataset's best training setting")
    args = parser.parse_args()
    knobs = best_training_knobs(args.per_dataset_knobs) if args.per_dataset_knobs else {}
    logging.basicConfig(level=logging.WARNING)
    results = []
    for dataset in args.datasets:
        for graph in args.graphs:
            cfg = eval_config(f"dataset={dataset}", f"graph={graph}")
            inputs = prepare_evaluation(cfg)
            if inputs.bundle.stats["edges"] == 0:
                print(f"\n{dataset} / {graph}: no edges (the question file carries no contexts); skipped", flush=True)
                results.append({"dataset": dataset, "graph": graph, "skipped": "graph has no edges"})
                continue
            ball = ball_provider(cfg, inputs.bundle, Path(tempfile.mkdtemp()))
            scores = {}
            for name in RETRIEVERS:
                overrides = knobs.get(dataset, {}) if name.startswith("iso") else {}
                result = build_retriever(retriever_config(name, **overrides), inputs.bundle, ball).retrieve(inputs.queries, cfg.k)
                scores[name] = retrieval_metrics(result.indices, inputs.gold)
            iso = scores["iso"]["recall@5"]
            entry = {
                "dataset": dataset, "graph": graph, "builders": inputs.bundle.graph.builders, "leak": inputs.bundle.leak,
                "n_questions": len(inputs.queries), "metrics": scores,
                "iso_beats_dense_r5": iso > scores["dense"]["recall@5"], "iso_beats_ppr_r5": iso > scores["ppr"]["recall@5"],
                "real_phi_beats_ablations_r5": all(iso > scores[a]["recall@5"] for a in ABLATIONS),
            }
            results.append(entry)
            label = "LEAK " if entry["leak"] else ""
            print(f"\n{dataset} / {graph} {label}({entry['n_questions']} dev questions)")
            print(f"  {'retriever':14s} {'R@5':>6s} {'R@10':>6s} {'P@5':>6s} {'P@10':>6s}")
            for name, m in scores.items():
                print(f"  {name:14s} {m['recall@5']:6.3f} {m['recall@10']:6.3f} {m['precision@5']:6.3f} {m['precision@10']:6.3f}")
            print(f"  ISO/dense R@5 ratio {iso / scores['dense']['recall@5']:.3f}, ISO/PPR {iso / scores['ppr']['recall@5']:.3f}; "
                  f"real φ beats every ablation: {entry['real_phi_beats_ablations_r5']}", flush=True)
    if knobs:
        write_json(f"quality_{args.per_dataset_knobs.stem}.json", {"split": "dev", "knobs": f"per dataset, best on its training questions in {args.per_dataset_knobs.name}",
                                                                  "per_dataset_knobs": knobs, "results": results})
    else:
        write_json("quality.json", {"split": "dev", "knobs": "conf/retriever/iso.yaml (tuned on training questions)", "results": results})


if __name__ == "__main__":
    main()
