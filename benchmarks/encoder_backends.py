"""Encoder backends side by side: indexing throughput on a fixed passage sample, and Recall@5 on
the three dev sets' full corpora, in one run.

    python -m benchmarks.encoder_backends [--backends torch onnx onnx-int8 openvino openvino-bf16] [--sample 256] [--rounds 3]
        [--recall-backends torch onnx-int8 openvino-bf16] [--datasets 2wikimultihopqa musique hotpotqa]

* Throughput: the same ``--sample`` 2Wiki passages (evenly spaced through the corpus, default
  length), encoded by every backend in turn, ``--rounds`` times in alternating order (forward,
  backward, ...) so that load from other processes weighs on all alike; passages/s over all
  rounds, and the ratio to torch fp32. The embedding cache is off; tokenisation is included.
* Agreement: the cosine between each backend's and torch's embedding of every sampled passage.
* Recall@5 (dense and ISO-RAG, φ p = 0, the index's default graph, no f_θ) on each dev set's full corpus
  for every ``--recall-backends`` backend, and crossed: passages encoded by one backend, questions
  by another (torch and each other backend listed, both ways), which decides whether an index may be queried
  with another backend than it was built with.

Writes benchmarks/results/encoder_backends.json. The machine may be shared: absolute passages/s
are depressed, the ratios are measured side by side.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch

from benchmarks.common import add_override_argument, results_name, setup, write_json
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.encoders.backends import BACKENDS
from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.retrieval import Queries

DATASETS = ("2wikimultihopqa", "musique", "hotpotqa")


def encoder(backend: str) -> SentenceEncoder:
    """``backend``'s encoder; torch's and int8's embeddings are read from the embedding cache
    where earlier runs left them, the other backends encode afresh."""
    return SentenceEncoder(backend=backend, show_progress=False, cache_dir="default" if backend in ("torch", "onnx-int8") else None)


def throughput(backends: list[str], texts: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """passages/s of every backend over ``rounds`` alternating rounds, and its agreement with torch."""
    encoders = {b: SentenceEncoder(backend=b, show_progress=False, cache_dir=None) for b in backends}
    for e in encoders.values():
        e.encode(texts[:8])  # load and warm up
    seconds = dict.fromkeys(backends, 0.0)
    embeddings: dict[str, torch.Tensor] = {}
    for r in range(rounds):
        for b in backends if r % 2 == 0 else backends[::-1]:
            start = time.perf_counter()
            embeddings[b] = encoders[b].encode(texts)
            seconds[b] += time.perf_counter() - start
            print(f"  round {r + 1}: {b:13s} {len(texts) / (time.perf_counter() - start):7.1f} passages/s", flush=True)
    out = {}
    for b in backends:
        cosine = (embeddings[b] * embeddings["torch"]).sum(1)
        out[b] = {"passages_per_s": round(rounds * len(texts) / seconds[b], 2), "ratio_vs_torch": round(seconds["torch"] / seconds[b], 2),
                  "cosine_to_torch_min": round(float(cosine.min()), 6), "cosine_to_torch_mean": round(float(cosine.mean()), 6)}
    return out


def recall(dataset: str, backends: list[str], overrides: list[str]) -> dict[str, Any]:
    """Recall@5 of dense and ISO-RAG for every (passage backend, question backend) pair measured."""
    eval_ds = setup(f"dataset={dataset}", *overrides).dataset
    questions = [q.text for q in eval_ds.questions]
    indexes, queries = {}, {}
    for b in backends:
        start = time.perf_counter()
        enc = encoder(b)
        indexes[b] = ISORAGIndex.build(eval_ds.corpus, encoder=enc, f_theta=None, phi=PhiSpec(p=0), progress=False)
        queries[b] = enc.encode(questions)
        print(f"  {dataset}: {b} encoded {len(eval_ds.corpus)} passages + {len(questions)} questions in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    rows = {p.id: i for i, p in enumerate(indexes[backends[0]].passages)}
    gold = [{rows[g] for g in q.gold_ids} for q in eval_ds.questions]
    crossed = [(x, y) for b in backends if b != "torch" for x, y in (("torch", b), (b, "torch"))] if "torch" in backends else []
    pairs = [(b, b) for b in backends] + crossed
    results = []
    for passages, asked in pairs:
        row: dict[str, Any] = {"passages": passages, "questions": asked}
        for name in ("dense", "iso"):
            found = indexes[passages].retriever(name).retrieve(Queries(questions, queries[asked]), 5)
            row[f"{name}_recall@5"] = round(100 * retrieval_metrics(found.indices, gold, ks=(5,))["recall@5"], 2)
        results.append(row)
        print(f"  {dataset}: passages {passages:13s} questions {asked:13s} dense R@5 {row['dense_recall@5']:6.2f} "
              f"ISO R@5 {row['iso_recall@5']:6.2f}", flush=True)
    return {"dataset": dataset, "passages": len(eval_ds.corpus), "questions": len(questions), "pairs": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS), help="throughput (default: all)")
    parser.add_argument("--sample", type=int, default=256, help="2Wiki passages timed per round (default: 256)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds (default: 3)")
    parser.add_argument("--recall-backends", nargs="*", choices=BACKENDS, default=["torch", "onnx-int8", "openvino-bf16"],
                        help="backends whose Recall@5 is measured on full corpora; each crossed with torch (default: torch onnx-int8 openvino-bf16)")
    parser.add_argument("--datasets", nargs="*", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--out", type=results_name, default="encoder_backends.json")
    add_override_argument(parser)
    args = parser.parse_args()
    if "torch" not in args.backends or args.sample < 8 or args.rounds < 1:
        parser.error("--backends must include torch (the reference), --sample be >= 8 and --rounds >= 1")

    load_before = os.getloadavg()
    corpus = setup("dataset=2wikimultihopqa", *args.override).dataset.corpus
    step = max(1, len(corpus) // args.sample)
    texts = [p.content for p in corpus[::step][:args.sample]]
    print(f"throughput on {len(texts)} 2Wiki passages, {args.rounds} rounds ({torch.get_num_threads()} threads, "
          f"load {load_before[0]:.1f})", flush=True)
    speed = throughput(args.backends, texts, args.rounds)
    for b, figures in speed.items():
        print(f"{b:13s} {figures['passages_per_s']:7.1f} passages/s  {figures['ratio_vs_torch']:5.2f}x torch  "
              f"cosine to torch min {figures['cosine_to_torch_min']:.5f}", flush=True)
    payload: dict[str, Any] = {"sample_passages": len(texts), "rounds": args.rounds, "threads": torch.get_num_threads(),
                               "load_average_before": load_before, "throughput": speed, "recall": []}
    for dataset in args.datasets if args.recall_backends else []:  # written after each data set: a long run keeps what it measured
        payload["recall"].append(recall(dataset, args.recall_backends, args.override))
        write_json(args.out, {**payload, "load_average_after": os.getloadavg()})
    write_json(args.out, {**payload, "load_average_after": os.getloadavg()})


if __name__ == "__main__":
    main()
