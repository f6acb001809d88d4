"""Approximate nearest-neighbour candidates against the exact scan, side by side in one run.

    python -m benchmarks.ann [--sizes 100000 1000000] [--queries 1000] [--kinds hnsw ivf] [--datasets 2wikimultihopqa]

ISO-RAG end to end (k = 10, conf/retriever/iso.yaml: the index's knobs, else the defaults; queries already encoded) with the
exact scan and with FAISS HNSW and IVF at their default parameters
(``isorag_pyg.retrieval.ann.DEFAULT_PARAMS``), on every corpus:

* single-query latency p50 / p95 (200 queries, one call each) and batched per-query latency
  (all queries in one call, median of 3);
* pool recall: the share of the exact dense pool (top L = over_retrieval * k = 50) that the ANN
  pool holds, and the share of queries whose ISO-RAG top 10 is the exact one;
* ANN build seconds, size (the serialised FAISS index: about what it holds in memory, on top of
  the embeddings the index keeps anyway), save and load seconds;
* pool recall and batched search time against the search parameter (HNSW ``ef_search``, IVF
  ``nprobe``): how the defaults were chosen.

Real corpus: the shared dev set's (2Wiki: 6,119 passages, title-mention graph, 1,000 questions),
also Recall@5 / @10 of ISO-RAG exact against ANN.

Generated corpora: random unit vectors in 384-d have no neighbourhood structure (all points are
nearly equidistant), which makes any ANN's top-50 recall meaningless; these embeddings are
clustered instead, in two levels: topics (one per ~1,000 passages), clusters inside them (one
per ~40 passages), passages spread around their cluster's centre; queries are passages plus
noise. The spreads are set so that a query's top-1 / top-10 / top-50 cosines are close to those
of 2Wiki's questions (both recorded in the JSON). The graph is Barabási-Albert (m = 5) and φ is
random, as in latency.py. Writes benchmarks/results/ann.json.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import igraph as ig
import torch

from benchmarks.common import (
    add_override_argument,
    evaluation,
    make_retriever,
    per_query_ms,
    retriever_config,
    single_query_ms,
    write_json,
)
from isorag_pyg.evaluation import evaluate_retrievers
from isorag_pyg.graph import run_builders
from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.retrieval import ANNIndex, ISORetriever, Queries, RetrievalGraph
from isorag_pyg.retrieval.ann import SEARCH_PARAM
from isorag_pyg.retrieval.candidates import candidate_chunk, dense_candidates

K = 10
SINGLE_QUERIES = 200
#: values of each kind's search parameter (SEARCH_PARAM) swept
SWEEP = {"hnsw": [64, 128, 256, 512, 1024], "ivf": [16, 32, 64, 128, 256]}
ISO_KNOBS = ("num_seeds", "over_retrieval", "hops", "max_expansion", "beta", "alpha", "tau", "lambda_graph", "lambda_dense", "tol",
             "max_iter")


def clustered_corpus(n: int, num_queries: int, dim: int = 384, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit embeddings of ``n`` passages in topics and clusters, and ``num_queries`` noisy copies
    of random passages (see the module docstring)."""
    gen = torch.Generator().manual_seed(seed)
    clusters = max(1, n // 40)
    topics = torch.nn.functional.normalize(torch.randn(max(1, clusters // 25), dim, generator=gen), dim=-1)
    centres = topics[torch.randint(0, topics.size(0), (clusters,), generator=gen)]
    centres += 1.0 * torch.randn(clusters, dim, generator=gen) / dim**0.5
    x = centres[torch.randint(0, clusters, (n,), generator=gen)]
    x = torch.nn.functional.normalize(x.add_(1.2 * torch.randn(n, dim, generator=gen) / dim**0.5), dim=-1)
    picked = x[torch.randint(0, n, (num_queries,), generator=gen)]
    q = torch.nn.functional.normalize(picked + 1.2 * torch.randn(num_queries, dim, generator=gen) / dim**0.5, dim=-1)
    return x, q


def ba_graph(n: int) -> torch.Tensor:
    """A Barabási-Albert graph (m = 5), both directions."""
    torch.manual_seed(0)
    edges = torch.tensor(ig.Graph.Barabasi(n, 5, directed=False).get_edgelist(), dtype=torch.long).t()
    return torch.cat([edges, edges.flip(0)], dim=1)


def pools(index: RetrievalGraph, queries: torch.Tensor, size: int, ann: ANNIndex | None) -> torch.Tensor:
    """Every query's dense pool, in chunks."""
    chunk = candidate_chunk(index, ann)
    return torch.cat([dense_candidates(index, queries[i:i + chunk], size, ann).pool.cpu() for i in range(0, queries.size(0), chunk)])


def recall(found: torch.Tensor, exact: torch.Tensor) -> float:
    """Mean share of each row of ``exact`` that the same row of ``found`` holds."""
    hits = (found.unsqueeze(2) == exact.unsqueeze(1)).any(dim=1).float()
    return float(hits.mean())


def cosine_profile(index: RetrievalGraph, queries: torch.Tensor) -> dict[str, float]:
    """Mean cosine of a query's 1st, 10th and 50th passage: how the corpus compares with 2Wiki."""
    top = dense_candidates(index, queries[:200], min(50, index.num_nodes)).pool_scores
    return {f"top{rank}": float(top[:, rank - 1].mean()) for rank in (1, 10, 50) if rank <= top.size(1)}


def latency(retriever: ISORetriever, queries: Queries) -> dict[str, float]:
    def run(part: Queries):
        return retriever.retrieve(part, K)

    singles = single_query_ms(run, queries, SINGLE_QUERIES)
    return {"single_p50_ms": statistics.median(singles), "single_p95_ms": sorted(singles)[int(0.95 * (len(singles) - 1))],
            "batched_ms": per_query_ms(run, queries)}


def build_ann(kind: str, build: Callable[[str], ANNIndex], num_passages: int) -> tuple[ANNIndex, dict[str, Any]]:
    """``build(kind)`` timed, then saved and loaded again (timed, the copy dropped)."""
    start = time.perf_counter()
    ann = build(kind)
    row: dict[str, Any] = {"params": dict(ann.params), "build_s": time.perf_counter() - start}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ann.safetensors"
        start = time.perf_counter()
        ann.save(path)
        os.sync()
        row["save_s"] = time.perf_counter() - start
        row["bytes"] = path.stat().st_size
        start = time.perf_counter()
        ANNIndex.load(path)
        row["load_s"] = time.perf_counter() - start
    row["bytes_per_passage"] = row["bytes"] / num_passages
    return ann, row


def sweep(ann: ANNIndex, index: RetrievalGraph, queries: torch.Tensor, exact_pool: torch.Tensor) -> list[dict[str, float]]:
    """Pool recall and batched FAISS search time at each value of the kind's search parameter
    (then back to the default)."""
    name = SEARCH_PARAM[ann.kind]
    default, rows = ann.params[name], []
    unit = index.unit_queries(queries)
    for value in SWEEP[ann.kind]:
        ann.set_search(value)
        start = time.perf_counter()
        found = ann.search(unit, exact_pool.size(1))
        search_ms = 1000 * (time.perf_counter() - start) / unit.size(0)
        rows.append({name: value, "pool_recall": recall(found, exact_pool), "search_ms": search_ms})
    ann.set_search(default)
    return rows


def compare(name: str, build: Callable[[str], ANNIndex], make: Callable[[ANNIndex | None], ISORetriever], index: RetrievalGraph,
            queries: Queries, kinds: list[str], extra: Callable[[dict[str, ISORetriever]], dict[str, dict[str, Any]]] | None = None,
            ) -> dict[str, Any]:
    """Exact against every ANN kind (``build(kind)``) on one corpus; ``make(ann)`` gives ISO-RAG
    over ``index`` with candidates from ``ann`` (``None``: exact), ``extra`` more figures per run."""
    exact = make(None)
    _, pool_size, _ = exact.sizes(K)
    exact_pool = pools(index, queries.embeddings, pool_size, None)
    exact_top = exact.retrieve(queries, K).indices
    runs: dict[str, dict[str, Any]] = {"exact": latency(exact, queries)}
    retrievers = {"exact": exact}
    for kind in kinds:
        ann, row = build_ann(kind, build, index.num_nodes)
        retriever = make(ann)
        row["pool_recall"] = recall(pools(index, queries.embeddings, pool_size, ann), exact_pool)
        row["same_top10_share"] = float((retriever.retrieve(queries, K).indices == exact_top).all(dim=1).float().mean())
        row.update(latency(retriever, queries))
        row["sweep"] = sweep(ann, index, queries.embeddings, exact_pool)
        runs[kind], retrievers[kind] = row, retriever
    if extra is not None:
        for label, metrics in extra(retrievers).items():
            runs[label].update(metrics)
    print(f"\n{name}: {index.num_nodes} passages, {queries.embeddings.size(0)} queries, pool L = {pool_size}")
    print(f"  {'':6s} {'p50 ms':>8s} {'p95 ms':>8s} {'batch ms/q':>10s} {'pool rec':>8s} {'same top10':>10s} {'build s':>8s} {'MiB':>7s}"
          + ("  R@5    R@10" if extra else ""))
    for label, row in runs.items():
        print(f"  {label:6s} {row['single_p50_ms']:8.2f} {row['single_p95_ms']:8.2f} {row['batched_ms']:10.3f} "
              f"{row.get('pool_recall', 1.0):8.4f} {row.get('same_top10_share', 1.0):10.3f} {row.get('build_s', 0.0):8.1f} "
              f"{row.get('bytes', 0) / 2**20:7.1f}" + (f"  {row['recall@5']:.4f} {row['recall@10']:.4f}" if extra else ""), flush=True)
    return {"corpus": name, "passages": index.num_nodes, "queries": queries.embeddings.size(0), "pool_size": pool_size,
            "cosines": cosine_profile(index, queries.embeddings), "runs": runs}


def dataset_row(dataset: str, graph: str, overrides: list[str], num_queries: int, kinds: list[str]) -> dict[str, Any]:
    """The real corpus: its index, dev questions and gold passages, and ISO-RAG's Recall@5 / @10."""
    inputs, _ = evaluation(f"dataset={dataset}", f"graph={graph}", *overrides)
    rcfg = retriever_config("iso", device="cpu")
    queries = inputs.queries.slice(0, num_queries)
    gold = inputs.gold[:num_queries]

    def build(kind: str) -> ANNIndex:
        inputs.index.set_ann(kind)
        return inputs.index.ann

    def make(ann: ANNIndex | None) -> ISORetriever:
        assert inputs.index.ann is ann  # the index's own, as ISORAGIndex.retriever uses it
        return make_retriever(inputs, rcfg)

    def quality(retrievers: dict[str, ISORetriever]) -> dict[str, dict[str, Any]]:
        runs = evaluate_retrievers(retrievers, queries, gold, K)
        return {label: {key: run.metrics[key] for key in ("recall@5", "recall@10")} for label, run in runs.items()}

    row = compare(f"{dataset}-dev ({graph})", build, make, inputs.index.retrieval_graph("cpu"), queries, kinds, quality)
    inputs.index.set_ann("exact")
    corpus = [inputs.index.passages[i] for i in range(len(inputs.index))]
    start = time.perf_counter()
    run_builders({"title_mention": {}}, corpus, inputs.index.embeddings)
    return {**row, "title_mention_graph_s": time.perf_counter() - start,
            "iso_knobs": make_retriever(inputs, rcfg).knobs.to_dict()}  # what ran: iso.yaml's over the index's stored knobs


def tensor_bytes(obj: object) -> int:
    """Bytes of the tensors among ``obj``'s attributes."""
    return sum(t.numel() * t.element_size() for t in vars(obj).values() if isinstance(t, torch.Tensor))


def generated_row(n: int, num_queries: int, kinds: list[str], rcfg) -> dict[str, Any]:
    x, q = clustered_corpus(n, num_queries)
    edge_index = ba_graph(n)
    start = time.perf_counter()
    index = RetrievalGraph(edge_index, x, "cpu", normalized=True)
    prepared = {"graph_index_s": time.perf_counter() - start, "graph_index_bytes": tensor_bytes(index)}
    log_phi = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    params = {k: rcfg[k] for k in ISO_KNOBS if k in rcfg}  # the knobs iso.yaml sets; ISORetriever's defaults for the rest
    row = compare(f"generated-{n}", lambda kind: ANNIndex.build(x, kind), lambda ann: ISORetriever(index, log_phi, **params, ann=ann),
                  index, Queries([""] * num_queries, q), kinds)
    return {**row, **prepared}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", type=int, default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--kinds", nargs="+", default=["hnsw", "ivf"], choices=["hnsw", "ivf"])
    parser.add_argument("--datasets", nargs="*", default=["2wikimultihopqa"])
    parser.add_argument("--graph", default="title_mention")
    add_override_argument(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rcfg = retriever_config("iso", device="cpu")
    payload: dict[str, Any] = {"k": K, "device": "cpu", "iso_config": {**ISOKnobs().to_dict(), **rcfg}, "rows": []}  # generated rows; a dataset row records its own
    runs = [lambda d=d: dataset_row(d, args.graph, args.override, args.queries, args.kinds) for d in args.datasets]
    runs += [lambda n=n: generated_row(n, args.queries, args.kinds, rcfg) for n in args.sizes]
    for run in runs:
        load = os.getloadavg()  # the machine is shared: what else ran shows here (this run adds about 2)
        payload["rows"].append({**run(), "load_average_before": load, "load_average_after": os.getloadavg()})
        write_json("ann.json", {**payload, "partial": True})
    write_json("ann.json", payload)


if __name__ == "__main__":
    main()
