"""Does f_θ's hyperbolic geometry help retrieval? A control on the TRAINING questions.

    python -m benchmarks.f_theta_geometry [--datasets musique hotpotqa 2wikimultihopqa] [--graph title_mention]

With volume exponent p = 0 every node has volume 1 and φ only counts nodes, so the ball
coordinates play no part. This script trains f_θ in several variants on each training corpus
graph:
- ``default``: conf/model and conf/data as they are.
- ``no_radial``: the radial depth regulariser switched off, so the radius comes from the
  triplet loss alone.
- ``strong_radial``: the regulariser weighted 5×.
- ``wide_radius``: leaf targets at ‖z‖ = 0.99, so λ spans 2 to about 100.

For each variant it compares ISO-RAG's Recall@5 with p = 1 and p = 4 against p = 0, at
conf/retriever/iso.yaml (the defaults on this graph) and several β. It also reports the AUROC of −|Δ log φ| for useful
(gold–gold) edges, as benchmarks/phi_signal.py does. Writes benchmarks/results/f_theta_geometry.json.
"""
from __future__ import annotations

import argparse
import logging

from benchmarks.common import (
    add_override_argument,
    evaluation,
    gap_auroc,
    make_retriever,
    profile_gap,
    retriever_config,
    useful_edge_mask,
    write_json,
)
from isorag_pyg.evaluation import retrieval_metrics

VARIANTS = {
    "default": [],
    "no_radial": ["model.radial_weight=0.0"],
    "strong_radial": ["model.radial_weight=5.0"],
    "wide_radius": ["data.r_max=0.99"],
}
BETAS = [0.01, 0.05, 0.2]
EXPONENTS = [1.0, 4.0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graph", default="title_mention")
    add_override_argument(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for dataset in args.datasets:
        useful = None  # the corpus graph is the same for every variant; only f_θ differs
        for variant, overrides in VARIANTS.items():
            inputs, k = evaluation(f"dataset={dataset}", f"graph={args.graph}", "split=train", *overrides, *args.override)  # the index of this variant: f_θ trained with its overrides
            edges = inputs.index.retrieval_graph("cpu").up_edge_index  # each undirected edge once, as the retriever stores them
            if useful is None:
                useful = useful_edge_mask(edges, inputs.gold, len(inputs.index))
            norm = inputs.index.z.norm(dim=-1)
            exponents = ([0.0] if variant == "default" else []) + EXPONENTS  # p = 0 does not depend on f_θ
            for p in exponents:
                recalls = {}
                for beta in BETAS:
                    retriever = make_retriever(inputs, retriever_config("iso", p=p, beta=beta))
                    result = retriever.retrieve(inputs.queries, k)
                    recalls[f"recall@5_beta{beta}"] = retrieval_metrics(result.indices, inputs.gold)["recall@5"]
                row = {"dataset": dataset, "variant": "none (p = 0)" if p == 0 else variant, "p": p,
                       "auroc": gap_auroc(profile_gap(retriever.log_phi.cpu(), edges), useful),  # φ does not depend on β
                       "norm_range": [float(norm.min()), float(norm.max())], **recalls}
                rows.append(row)
                print(f"{dataset:16s} {row['variant']:14s} p={p}: AUROC {row['auroc']:.3f}  R@5 "
                      + "  ".join(f"β={b}: {row[f'recall@5_beta{b}']:.4f}" for b in BETAS), flush=True)
    write_json("f_theta_geometry.json", {"protocol": "split=train (training questions over their own corpus); knobs of conf/retriever/iso.yaml",
                                         "variants": VARIANTS, "rows": rows})


if __name__ == "__main__":
    main()
