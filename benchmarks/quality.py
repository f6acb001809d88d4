"""Retrieval quality on the shared dev sets: ISO-RAG against flat dense, BM25, global PPR and
the φ ablations, with the knobs in conf/ (tuned on the training questions by tune_iso.py).

    python benchmarks/quality.py [--datasets musique hotpotqa 2wikimultihopqa] [--graphs leakfree title_mention context_cooccurrence]

``context_cooccurrence`` builds the graph from the evaluated questions' own contexts: it is
reported separately, labelled LEAK, and is not a held-out result. Writes
benchmarks/results/quality.json.
"""
from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from _common import eval_config, retriever_config, write_json

from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.evaluation.runner import ball_provider, prepare_evaluation
from isorag_pyg.retrieval.factory import build_retriever

RETRIEVERS = ["iso", "dense", "bm25", "ppr", "iso_uniform", "iso_shuffled", "iso_random"]
ABLATIONS = ["iso_uniform", "iso_shuffled", "iso_random"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=["leakfree", "title_mention", "context_cooccurrence"])
    args = parser.parse_args()
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
                result = build_retriever(retriever_config(name), inputs.bundle, ball).retrieve(inputs.queries, cfg.k)
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
    write_json("quality.json", {"split": "dev", "knobs": "conf/retriever/iso.yaml (tuned on training questions)", "results": results})


if __name__ == "__main__":
    main()
