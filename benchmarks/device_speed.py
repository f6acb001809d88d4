"""The same work on each device, side by side in one run: CUDA against the CPU on generated corpora.

    python -m benchmarks.device_speed [--devices cpu cuda] [--passages 100000 1000000] [--queries 1000]
                                      [--phi-nodes 100000] [--f-theta-nodes 20000] [--epochs 2]

Generated corpora (benchmarks/common.py): a Barabási-Albert graph (m = 5), random unit 384-d embeddings
(MiniLM's width), queries near random passages, random φ. On each device in turn:

* ISO-RAG batched retrieval (``ISORetriever``, the library's default knobs): ms per query with all
  queries in one call (median of 3 after a warm-up), and how far its top 10 agrees with the first
  device's (share of queries with the same ranked list, mean overlap of the sets);
* φ for every node of a ``--phi-nodes`` graph (``log_isoperimetric_profile``, p = 2, random ball
  coordinates): seconds (after a warm-up on a small graph) and the largest difference from the
  first device's;
* f_θ: ``fit_f_theta`` end to end on a ``--f-theta-nodes`` graph (validation before and after,
  ``--epochs`` epochs, checkpoints, every node embedded; after a one-epoch warm-up fit on 500
  nodes), Lightning's accelerator set to the device's, with the held-out triplet accuracy reached.

Each ratio is the first device's seconds over the other's, from this run. Every device named must
be present. Writes benchmarks/results/device_speed.json (``--out``).
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from functools import partial
from typing import Any

import torch
from torch_geometric.data import Data

from benchmarks.common import generated_corpus, generated_graph, per_query_ms, results_name, write_json
from isorag_pyg.retrieval import ISORetriever, RetrievalGraph
from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig
from isorag_pyg.training.fit import fit_f_theta
from isorag_pyg.utils import log_isoperimetric_profile, log_volume

K = 10


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def retrieval(devices: list[torch.device], n: int, num_queries: int) -> dict[str, Any]:
    """ISO-RAG batched ms/query on each device, and top-k agreement with the first device."""
    edge_index, x, queries, log_phi = generated_corpus(n, num_queries)
    row: dict[str, Any] = {"passages": n, "edges": int(edge_index.size(1) // 2), "queries": num_queries, "runs": []}
    reference = None
    for device in devices:
        retrieve = partial(ISORetriever(RetrievalGraph(edge_index, x, device), log_phi).retrieve, k=K)
        run = {"device": str(device), "ms_per_query": per_query_ms(retrieve, queries)}
        top = retrieve(queries).indices
        reference = top if reference is None else reference
        run["same_ranking_share"] = float((top == reference).all(dim=1).float().mean())
        run["mean_overlap"] = sum(len(set(a) & set(b)) for a, b in zip(top.tolist(), reference.tolist())) / (K * num_queries)
        row["runs"].append(run)
    return with_speedups(row, "ms_per_query")


def phi(devices: list[torch.device], n: int) -> dict[str, Any]:
    """Seconds for φ of every node on each device, and the largest difference from the first."""
    torch.manual_seed(0)
    edge_index = generated_graph(n)
    log_vol = log_volume(torch.nn.functional.normalize(torch.randn(n, 16), dim=-1) * torch.rand(n, 1) * 0.99, p=2.0)
    warm_edges, warm_vol = generated_graph(1000), log_vol[:1000]
    row: dict[str, Any] = {"nodes": n, "directed_edges": int(edge_index.size(1)), "runs": []}
    reference = None
    for device in devices:
        log_isoperimetric_profile(warm_edges.to(device), warm_vol.to(device), shell_floor=0.0)
        synchronize(device)
        start = time.perf_counter()
        out = log_isoperimetric_profile(edge_index.to(device), log_vol.to(device), shell_floor=0.0)
        synchronize(device)
        seconds = time.perf_counter() - start
        out = out.cpu()
        reference = out if reference is None else reference
        finite = torch.isfinite(reference)
        row["runs"].append({"device": str(device), "seconds": seconds, "same_finite": bool((torch.isfinite(out) == finite).all()),
                            "max_abs_diff": float((out[finite] - reference[finite]).abs().max())})
    return with_speedups(row, "seconds")


def f_theta(devices: list[torch.device], n: int, epochs: int) -> dict[str, Any]:
    """Seconds for ``fit_f_theta`` on each device, and the held-out triplet accuracy reached."""
    torch.manual_seed(0)
    edge_index = generated_graph(n)
    graph = Data(x=torch.nn.functional.normalize(torch.randn(n, 384), dim=-1), edge_index=edge_index, num_nodes=n)
    warm = Data(x=graph.x[:500], edge_index=generated_graph(500), num_nodes=500)
    row: dict[str, Any] = {"nodes": n, "undirected_edges": int(edge_index.size(1) // 2), "epochs": epochs, "runs": []}
    for device in devices:
        trainer = {**DEFAULT_TRAINER, "accelerator": "gpu" if device.type == "cuda" else "cpu", "max_epochs": epochs,
                   "enable_progress_bar": False, "enable_model_summary": False}
        fit_f_theta(warm, FThetaConfig(trainer={**trainer, "max_epochs": 1}))  # one-time costs (CUDA context, Lightning) stay off the clock
        start = time.perf_counter()
        fit = fit_f_theta(graph, FThetaConfig(trainer=trainer))
        row["runs"].append({"device": str(device), "seconds": time.perf_counter() - start, "val_triplet_acc": fit.metrics["val/triplet_acc"]})
    return with_speedups(row, "seconds")


def with_speedups(row: dict[str, Any], key: str) -> dict[str, Any]:
    """Each run's ``speedup``: the first run's ``key`` over its own."""
    for run in row["runs"]:
        run["speedup"] = row["runs"][0][key] / run[key]
    return row


def summary(title: str, row: dict[str, Any], key: str, unit: str, extra: str) -> str:
    return f"{title}: " + "; ".join(f"{r['device']} {r[key]:.3f} {unit} (x{r['speedup']:.1f}, {extra} {r[extra]:.3g})" for r in row["runs"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", nargs="+", default=["cpu", "cuda"], help="the first is the baseline of every ratio")
    parser.add_argument("--passages", nargs="*", type=int, default=[100_000, 1_000_000], help="retrieval corpus sizes")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--phi-nodes", type=int, default=100_000, help="graph size for φ (0: skip)")
    parser.add_argument("--f-theta-nodes", type=int, default=20_000, help="graph size for f_θ (0: skip)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", type=results_name, default="device_speed.json", help="results file under benchmarks/results/")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    devices = [torch.device(d) for d in args.devices]
    if any(d.type == "cuda" for d in devices) and not torch.cuda.is_available():
        parser.error("CUDA was named but torch sees no GPU here")
    results: dict[str, Any] = {"devices": args.devices, "k": K, "load_before": os.getloadavg(), "retrieval": [], "partial": True}
    for n in args.passages:
        results["retrieval"].append(row := retrieval(devices, n, args.queries))
        print(summary(f"ISO-RAG batched, {n} passages", row, "ms_per_query", "ms/q", "same_ranking_share"), flush=True)
        write_json(args.out, results)
    if args.phi_nodes:
        results["phi"] = phi(devices, args.phi_nodes)
        print(summary(f"φ, {args.phi_nodes} nodes", results["phi"], "seconds", "s", "max_abs_diff"), flush=True)
        write_json(args.out, results)
    if args.f_theta_nodes:
        results["f_theta"] = f_theta(devices, args.f_theta_nodes, args.epochs)
        print(summary(f"f_θ fit, {args.f_theta_nodes} nodes, {args.epochs} epochs", results["f_theta"], "seconds", "s", "val_triplet_acc"), flush=True)
    write_json(args.out, {**results, "load_after": os.getloadavg(), "partial": False})


if __name__ == "__main__":
    main()
