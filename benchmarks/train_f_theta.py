"""Train f_θ on a shared dataset's corpus graph and measure what the geometry learned.

    python -m benchmarks.train_f_theta [--dataset 2wikimultihopqa] [--graphs leakfree title_mention] [--epochs 30]

Reports wall time, held-out triplet accuracy next to the untrained encoder's and plain cosine's on
the same triplets, and the Spearman correlation of node degree with ‖z‖ (negative: hubs near the
origin). Writes benchmarks/results/train_f_theta.json.
"""
from __future__ import annotations

import argparse
import logging
import time

from benchmarks.common import setup, write_json
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.utils import PhiSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="2wikimultihopqa")
    parser.add_argument("--graphs", nargs="+", default=["leakfree", "title_mention"])
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for graph in args.graphs:
        chosen = setup(f"dataset={args.dataset}", f"graph={graph}", f"trainer.max_epochs={args.epochs}")
        eval_ds, train_ds, options = chosen.dataset, chosen.train, dict(chosen.options)
        f_theta = options.pop("f_theta")
        index = ISORAGIndex.build(eval_ds.corpus, **{**options, "phi": PhiSpec(p=0.0)}, f_theta=None, questions=eval_ds,
                                  train_questions=train_ds, progress=False)
        start = time.perf_counter()
        metrics = index.train_f_theta(f_theta, update_phi=False)
        seconds = time.perf_counter() - start
        stats = index.statistics
        rows.append({"graph": graph, "nodes": stats["nodes"], "edges": stats["edges"], "seconds": seconds, **metrics})
        print(f"{args.dataset}/{graph}: {stats['nodes']} nodes, {stats['edges']} edges, {seconds:.0f} s; "
              f"held-out triplet acc {metrics['val/triplet_acc']:.3f} (untrained {metrics['val/triplet_acc_untrained']:.3f}, "
              f"cosine {metrics['val/triplet_acc_cosine_baseline']:.3f}); Spearman(degree, |z|) {metrics['spearman_degree_norm']:.3f}", flush=True)
    write_json("train_f_theta.json", {"dataset": args.dataset, "epochs": args.epochs, "rows": rows})


if __name__ == "__main__":
    main()
