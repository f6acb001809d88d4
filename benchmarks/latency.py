"""Retrieval latency per query: ISO-RAG batched and single-query against global PPR engines.

    python -m benchmarks.latency [--sizes 100000 1000000] [--queries 1000] [--device auto|cpu|cuda]

On the shared 2Wiki dev corpus (6,119 passages, leak-free graph, 1,000 dev questions) and on
generated corpora (random unit embeddings, Barabási-Albert graph with m=5, random φ), in one run:

* ISO-RAG batched (all queries in one call) and single-query (p50, p95), and its own unbatched loop;
* global PPR with igraph's PRPACK (the engine HippoRAG uses; damping and seeds matched), our batched
  global PPR, PyG's ``get_ppr`` (push-based, per seed) and networkx ``pagerank`` (fewer queries:
  they are slow), each per query.

Prints ratios measured side by side and writes benchmarks/results/latency.json plus
benchmarks/results/latency.png (cost against corpus size and batch size).
"""
from __future__ import annotations

import argparse
import logging
import statistics
import time

import igraph as ig
import matplotlib
import networkx as nx
import torch
from torch_geometric.utils import get_ppr

from benchmarks.common import (
    RESULTS,
    evaluation,
    generated_corpus,
    make_retriever,
    per_query_ms,
    retriever_config,
    single_query_ms,
    write_json,
)
from isorag_pyg.retrieval import GlobalPPRRetriever, ISORetriever, Queries, RetrievalGraph
from isorag_pyg.retrieval.scoring import teleport_weights
from isorag_pyg.utils.device import device_of

matplotlib.use("Agg")
import matplotlib.pyplot as plt

K = 10


def seeds_and_teleport(graph_x: torch.Tensor, queries: Queries, num_seeds: int = 5, tau: float = 10.0):
    scores = queries.embeddings @ graph_x.t()
    top = scores.topk(num_seeds, dim=1)
    return top.indices, teleport_weights(top.values, tau)


def igraph_ppr_ms(edge_index: torch.Tensor, n: int, x: torch.Tensor, queries: Queries, alpha: float, count: int) -> float:
    g = ig.Graph(n=n, edges=edge_index[:, edge_index[0] < edge_index[1]].t().tolist())
    seeds, weights = seeds_and_teleport(x, queries.slice(0, count))
    start = time.perf_counter()
    for s, w in zip(seeds.tolist(), weights.tolist()):
        reset = [0.0] * n
        for node, value in zip(s, w):
            reset[node] = value
        pr = g.personalized_pagerank(damping=alpha, reset=reset, implementation="prpack")
        sorted(range(n), key=pr.__getitem__, reverse=True)[:K]
    return 1000.0 * (time.perf_counter() - start) / count


def networkx_ppr_ms(edge_index: torch.Tensor, n: int, x: torch.Tensor, queries: Queries, alpha: float, count: int) -> float:
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edge_index.t().tolist())
    seeds, weights = seeds_and_teleport(x, queries.slice(0, count))
    start = time.perf_counter()
    for s, w in zip(seeds.tolist(), weights.tolist()):
        pr = nx.pagerank(g, alpha=alpha, personalization=dict(zip(s, w)), tol=1e-6)
        sorted(pr, key=pr.__getitem__, reverse=True)[:K]
    return 1000.0 * (time.perf_counter() - start) / count


def pyg_get_ppr_ms(edge_index: torch.Tensor, n: int, x: torch.Tensor, queries: Queries, alpha: float, count: int) -> float:
    seeds, weights = seeds_and_teleport(x, queries.slice(0, count))
    start = time.perf_counter()
    for s, w in zip(seeds, weights):
        # get_ppr's alpha is the teleport probability; one push-based PPR vector per seed, mixed by the seed weights
        ppr_index, ppr_weight = get_ppr(edge_index, alpha=1.0 - alpha, eps=1e-5, target=s, num_nodes=n)
        scores = torch.zeros(n).index_add_(0, ppr_index[1], ppr_weight * w[torch.searchsorted(s.sort().values, ppr_index[0])])
        scores.topk(K)
    return 1000.0 * (time.perf_counter() - start) / count


def measure(name: str, iso: ISORetriever, ppr: GlobalPPRRetriever, edge_index, n, x, queries, alpha, slow_count) -> dict:
    batched = per_query_ms(lambda q: iso.retrieve(q, K), queries)
    singles = single_query_ms(lambda q: iso.retrieve(q, K), queries, 200)
    loop = statistics.mean(singles)  # the same queries answered one call at a time
    row = {
        "corpus": name, "passages": n, "edges": int(edge_index.size(1) // 2), "queries": len(queries),
        "iso_batched_ms": batched, "iso_single_p50_ms": statistics.median(singles),
        "iso_single_p95_ms": sorted(singles)[int(0.95 * (len(singles) - 1))], "iso_unbatched_loop_ms": loop,
        # per-query cost of global PPR does not depend on how many queries share a call: 100 are enough
        "global_ppr_batched_ms": per_query_ms(lambda q: ppr.retrieve(q, K), queries.slice(0, 100), repeats=1),
        "igraph_prpack_ms": igraph_ppr_ms(edge_index, n, iso.graph.embeddings, queries, alpha, slow_count),
        "pyg_get_ppr_ms": pyg_get_ppr_ms(edge_index, n, iso.graph.embeddings, queries, alpha, max(2, slow_count // 5)),
    }
    if n <= 200_000:
        row["networkx_ms"] = networkx_ppr_ms(edge_index, n, iso.graph.embeddings, queries, alpha, max(2, slow_count // 10))
    row["igraph_over_iso_batched"] = row["igraph_prpack_ms"] / row["iso_batched_ms"]
    print(f"{name}: {n} passages; ISO batched {batched:.3f} ms/q, single p50 {row['iso_single_p50_ms']:.2f} ms "
          f"p95 {row['iso_single_p95_ms']:.2f} ms, unbatched loop {loop:.2f} ms; global PPR: ours batched "
          f"{row['global_ppr_batched_ms']:.2f}, igraph {row['igraph_prpack_ms']:.2f}, PyG get_ppr {row['pyg_get_ppr_ms']:.2f}"
          + (f", networkx {row['networkx_ms']:.1f}" if "networkx_ms" in row else "")
          + f" ms/q; igraph / ISO batched = {row['igraph_over_iso_batched']:.1f}x", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", type=int, default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--device", default="auto", help="where ISO-RAG and our global PPR run: auto (CUDA when present), cpu, cuda")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    device = device_of(args.device)
    rcfg = retriever_config("iso", device=args.device)
    inputs, _ = evaluation("dataset=2wikimultihopqa", "graph=leakfree")
    iso = make_retriever(inputs, rcfg)
    alpha = iso.knobs.alpha
    ppr = make_retriever(inputs, retriever_config("ppr", device=args.device))
    queries = inputs.queries.slice(0, args.queries)
    rows = [measure("2wiki-dev", iso, ppr, iso.graph.edge_index, len(inputs.index), inputs.index.embeddings, queries, alpha, 100)]
    batch_curve = {b: per_query_ms(lambda q, b=b: [iso.retrieve(q.slice(i, i + b), K) for i in range(0, len(q), b)], queries.slice(0, max(b, 200)), repeats=1)
                   for b in (1, 10, 100, 1000)}
    print("ISO-RAG ms/query by batch size on 2wiki-dev: " + ", ".join(f"{b}: {v:.3f}" for b, v in batch_curve.items()), flush=True)
    for n in args.sizes:
        edge_index, x, q, log_phi = generated_corpus(n, args.queries)
        params = {k: getattr(iso.knobs, k) for k in ("num_seeds", "over_retrieval", "hops", "max_expansion", "beta", "alpha", "tau", "lambda_graph", "lambda_dense", "tol", "max_iter")}
        graph = RetrievalGraph(edge_index, x, device)
        iso_n = ISORetriever(graph, log_phi, **params)
        ppr_n = GlobalPPRRetriever(graph, alpha=alpha)
        rows.append(measure(f"generated-{n}", iso_n, ppr_n, iso_n.graph.edge_index, n, x, q, alpha, 20 if n < 1_000_000 else 5))
        write_json("latency.json", {"k": K, "device": str(device), "iso_config": iso.knobs.to_dict(), "rows": rows, "batch_size_ms_per_query": batch_curve, "partial": True})
        del iso_n, ppr_n, edge_index, x
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    sizes = [r["passages"] for r in rows]
    for key, label in (("iso_batched_ms", "ISO-RAG batched"), ("iso_single_p50_ms", "ISO-RAG single (p50)"), ("igraph_prpack_ms", "igraph PRPACK global PPR"), ("global_ppr_batched_ms", "our global PPR, batched")):
        a.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    a.set(xscale="log", yscale="log", xlabel="passages", ylabel="ms per query", title="cost vs corpus size")
    a.legend(fontsize=8)
    b.plot(list(batch_curve), list(batch_curve.values()), marker="o")
    b.set(xscale="log", yscale="log", xlabel="queries per call", ylabel="ms per query", title="ISO-RAG on 2wiki-dev vs batch size")
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / "latency.png", dpi=100)
    write_json("latency.json", {"k": K, "device": str(device), "iso_config": iso.knobs.to_dict(), "rows": rows, "batch_size_ms_per_query": batch_curve})


if __name__ == "__main__":
    main()
