"""Offline cost of f_θ against corpus size: setup, one training epoch and peak memory.

    python -m benchmarks.f_theta_scale [--nodes 10000 100000 1000000] [--m 5] [--dim 384] [--epochs 1]

Each size runs in a fresh subprocess (peak RSS is that size's own) on a Barabási-Albert graph
with ``m`` edges per new node (1M nodes, m=5: 5M undirected edges) and random unit features of
``dim`` (MiniLM's width), with the project's own ``conf/model/poincare.yaml``,
``conf/data/triplets.yaml`` and ``conf/trainer/cpu.yaml`` (no logger, no checkpoints). An epoch
is every training edge in both directions once, plus the validation pass over all nodes.
Prints the growth ratios and writes benchmarks/results/f_theta_scale.json and
benchmarks/results/offline_cost.png (this curve next to φ's from phi_scale.json when present).
"""
from __future__ import annotations

import argparse
import itertools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def one(n: int, m: int, dim: int, epochs: int) -> dict:
    import lightning as L
    import torch
    from torch_geometric.data import Data

    from benchmarks.common import f_theta_settings, generated_graph
    from isorag_pyg.training.datamodule import GraphTripletDataModule
    from isorag_pyg.training.module import HyperbolicEmbeddingModule

    L.seed_everything(0, verbose=False)
    edge_index = generated_graph(n, m)
    data = Data(x=torch.nn.functional.normalize(torch.randn(n, dim), dim=-1), edge_index=edge_index, num_nodes=n)
    config = f_theta_settings("trainer=cpu")
    start = time.perf_counter()
    datamodule = GraphTripletDataModule(data, seed=0, **config.data)
    datamodule.setup()
    setup_seconds = time.perf_counter() - start
    model = HyperbolicEmbeddingModule(in_dim=dim, **config.model)
    trainer = L.Trainer(**{**config.trainer, "max_epochs": epochs, "logger": False, "enable_checkpointing": False,
                           "enable_progress_bar": False, "enable_model_summary": False})
    start = time.perf_counter()
    trainer.fit(model, datamodule=datamodule)
    fit_seconds = time.perf_counter() - start
    steps = int(trainer.global_step)
    return {"nodes": n, "undirected_edges": int(data.edge_index.size(1) // 2), "dim": dim, "epochs": epochs, "steps": steps,
            "setup_seconds": setup_seconds, "fit_seconds": fit_seconds, "seconds_per_epoch": fit_seconds / epochs,
            "ms_per_step": 1000.0 * fit_seconds / max(1, steps), "val_triplet_acc": float(trainer.callback_metrics["val/triplet_acc"]),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def plot(rows: list[dict], results: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["nodes"] for r in rows], [r["setup_seconds"] + r["seconds_per_epoch"] for r in rows], marker="o", label="f_θ: setup + one epoch")
    phi = results / "phi_scale.json"
    if phi.is_file():
        phi_rows = json.loads(phi.read_text())["rows"]
        ax.plot([r["nodes"] for r in phi_rows], [r["seconds"] for r in phi_rows], marker="s", label="φ for all nodes (phi_scale.py)")
    ax.set(xscale="log", yscale="log", xlabel="passages (Barabási-Albert, m=5)", ylabel="seconds", title="offline cost vs corpus size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(results / "offline_cost.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--m", type=int, default=5)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(args.nodes[0], args.m, args.dim, args.epochs)))
        return
    from benchmarks.common import REPO, RESULTS, write_json  # not in the measured children

    rows = []
    for n in args.nodes:
        cmd = [sys.executable, "-m", "benchmarks.f_theta_scale", "--child", "--nodes", str(n), "--m", str(args.m), "--dim", str(args.dim), "--epochs", str(args.epochs)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{n:>9} nodes {row['undirected_edges']:>9} edges: setup {row['setup_seconds']:7.1f} s, epoch {row['seconds_per_epoch']:7.1f} s "
              f"({row['steps']} steps, {row['ms_per_step']:.1f} ms/step), peak {row['peak_rss_mib']:7.0f} MiB", flush=True)
        write_json("f_theta_scale.json", {"graph": f"Barabasi-Albert m={args.m}", "rows": rows, "partial": n != args.nodes[-1]})
    for a, b in itertools.pairwise(rows):
        print(f"x{b['nodes'] / a['nodes']:.0f} nodes: epoch time x{b['seconds_per_epoch'] / a['seconds_per_epoch']:.1f}, "
              f"setup x{b['setup_seconds'] / a['setup_seconds']:.1f}, peak memory x{b['peak_rss_mib'] / a['peak_rss_mib']:.1f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(rows, RESULTS)


if __name__ == "__main__":
    main()
