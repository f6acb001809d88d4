"""Does φ separate useful edges from the rest? A diagnostic on the TRAINING questions.

    python -m benchmarks.phi_signal [--datasets musique hotpotqa 2wikimultihopqa] [--graph title_mention]

An edge is *useful* for a question when both its ends are gold passages of that question (the
bridge a multi-hop retriever should walk). The isoperimetric filter keeps an edge when
|log φ_u − log φ_v| ≤ −log β, so φ can only help if useful edges have smaller gaps than the other
edges. Reported per dataset and φ setting (volume exponent ``p``, ``shell_floor``), with φ from
f_θ trained on that corpus graph: the AUROC of −|Δ log φ| for useful against all other edges
(0.5: no signal; above 0.5: pruning by φ removes other edges first), and the share of useful and
of other edges that the filter removes at several β. Writes benchmarks/results/phi_signal.json.
"""
from __future__ import annotations

import argparse
import logging
import math

from benchmarks.common import evaluation, gap_auroc, profile_gap, useful_edge_mask, write_json

SETTINGS = [(1.0, 8.0), (1.0, 0.0), (4.0, 8.0), (4.0, 0.0)]
BETAS = [0.01, 0.05, 0.1, 0.3, 0.5]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graph", default="title_mention")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for dataset in args.datasets:
        inputs, _ = evaluation(f"dataset={dataset}", f"graph={args.graph}", "split=train")
        edges = inputs.index.retrieval_graph("cpu").up_edge_index  # each undirected edge once
        useful = useful_edge_mask(edges, inputs.gold, len(inputs.index))
        for p, floor in SETTINGS:
            log_phi = inputs.index.log_phi_for(inputs.index.phi.replace(p=p, shell_floor=floor))
            gap = profile_gap(log_phi, edges)
            auroc = gap_auroc(gap, useful)
            removed = {b: (float((gap[useful] > -math.log(b)).float().mean()), float((gap[~useful] > -math.log(b)).float().mean())) for b in BETAS}
            row = {"dataset": dataset, "graph": args.graph, "p": p, "shell_floor": floor, "edges": int(edges.size(1)),
                   "useful_edges": int(useful.sum()), "auroc": auroc,
                   "removed_useful_share": {str(b): r[0] for b, r in removed.items()},
                   "removed_other_share": {str(b): r[1] for b, r in removed.items()}}
            rows.append(row)
            print(f"{dataset} p={p} floor={floor}: {row['useful_edges']}/{row['edges']} useful edges, AUROC {auroc:.3f}; removed useful/other at β "
                  + ", ".join(f"{b}: {r[0]:.2f}/{r[1]:.2f}" for b, r in removed.items()), flush=True)
    write_json("phi_signal.json", {"protocol": "split=train; useful edge = both ends gold for one question", "rows": rows})


if __name__ == "__main__":
    main()
