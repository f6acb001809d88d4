"""Collect an ablation multirun (``evaluate.py -m hparams_search=ablation_grid``) into one CSV and a plot.

    python -m benchmarks.aggregate_ablation multirun/eval/musique/<time> [--out DIR]

Writes ablation.csv (one row per job) and ablation.png (recall@5, precision@5 and the share of
removed edges against β, one line per φ mode, one column per over-retrieval factor X).
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FIELDS = ["dataset", "graph", "leak", "beta", "over_retrieval", "phi_mode", "recall@5", "recall@10", "precision@5",
          "precision@10", "removed_edge_fraction", "latency_ms_per_query"]


def collect(sweep_dir: Path) -> list[dict]:
    rows = []
    for metrics_path in sorted(sweep_dir.glob("*/metrics.json")):
        metrics = json.loads(metrics_path.read_text())
        run = metrics["retrievers"][metrics["retriever"]]
        retriever = run.get("knobs") or run["config"]  # the knobs the job's retriever ran with (older runs: its config)
        rows.append({"dataset": metrics["dataset"], "graph": "+".join(metrics["builders"]), "leak": metrics["leak"],
                     "beta": retriever["beta"], "over_retrieval": retriever["over_retrieval"], "phi_mode": retriever["phi_mode"],
                     **{k: metrics[k] for k in FIELDS[6:]}})
    if not rows:
        raise SystemExit(f"no */metrics.json under {sweep_dir}")
    return rows


def plot(rows: list[dict], path: Path) -> None:
    factors = sorted({r["over_retrieval"] for r in rows})
    metrics = ["recall@5", "precision@5", "removed_edge_fraction"]
    fig, axes = plt.subplots(len(metrics), len(factors), figsize=(4 * len(factors), 3 * len(metrics)), squeeze=False, sharex=True)
    for j, factor in enumerate(factors):
        for mode in sorted({r["phi_mode"] for r in rows}):
            sel = sorted((r for r in rows if r["over_retrieval"] == factor and r["phi_mode"] == mode), key=lambda r: r["beta"])
            for i, metric in enumerate(metrics):
                axes[i][j].plot([r["beta"] for r in sel], [r[metric] for r in sel], marker="o", label=mode)
        axes[0][j].set_title(f"X = {factor}")
        axes[-1][j].set_xlabel("β")
    for i, metric in enumerate(metrics):
        axes[i][0].set_ylabel(metric)
    axes[0][0].legend(title="φ")
    leak = " (LEAK: graph from the evaluated questions)" if any(r["leak"] for r in rows) else ""
    fig.suptitle(f"{rows[0]['dataset']}, graph {rows[0]['graph']}{leak}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the sweep folder)")
    args = parser.parse_args()
    out = args.out or args.sweep_dir
    out.mkdir(parents=True, exist_ok=True)
    rows = collect(args.sweep_dir)
    with (out / "ablation.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, out / "ablation.png")
    print(f"{len(rows)} runs -> {out / 'ablation.csv'}, {out / 'ablation.png'}")


if __name__ == "__main__":
    main()
