"""``isorag query|info``: read a saved index."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from isorag_pyg.cli.start_time import STARTED
from isorag_pyg.cli.update import bridge_line


def run_query(args: argparse.Namespace) -> list[str]:
    """Retrieve for each question: ranked lines, or one JSON object a question with ``--json``."""
    from isorag_pyg.index import ISORAGIndex
    from isorag_pyg.index.results import answer_json

    timings = {"imports_s": time.perf_counter() - STARTED}
    start = time.perf_counter()
    index = ISORAGIndex.load(args.index_dir, verify=not args.no_verify)
    timings["load_s"] = time.perf_counter() - start
    start = time.perf_counter()
    index.encoder.encode(["warm-up"])  # model load, timed apart from retrieval
    timings["model_s"] = time.perf_counter() - start
    start = time.perf_counter()
    hits = index.retrieve(args.questions, k=args.k, retriever=args.retriever)
    timings["retrieval_s"] = time.perf_counter() - start
    lines = []
    for question, results in zip(args.questions, hits):
        if args.json:
            lines.append(json.dumps(answer_json(question, results), ensure_ascii=False))
            continue
        lines.append(f"Q: {question}")
        for rank, r in enumerate(results, 1):
            text = r.text if len(r.text) <= 160 else r.text[:157] + "..."
            lines.append(f"  {rank}. [{r.score:.3f}] {r.title} ({r.id}): {text}")
    if args.timings:
        timings["total_s"] = time.perf_counter() - STARTED
        print(json.dumps(timings), file=sys.stderr)
    return lines


def run_info(args: argparse.Namespace) -> list[str]:
    """The manifest as JSON on stdout; the graph's statistics in words on stderr."""
    from isorag_pyg.graph.auto import describe_graph
    from isorag_pyg.index import ISORAGIndex

    index = ISORAGIndex.load(args.index_dir, verify=not args.no_verify)
    bridges = index.bridges()
    info: dict[str, Any] = {**index.info(), "bridges": [b.to_dict() for b in bridges]}
    for line in describe_graph(info["graph"]["statistics"]):  # in words, beside the manifest on stdout
        print(line, file=sys.stderr)
    for bridge in bridges:
        print(f"bridge {bridge_line(bridge)}{' (left out of the walk)' if bridge.left_out else ''}"
              f"{' (quarantined)' if bridge.quarantined else ''}", file=sys.stderr)
    return [json.dumps(info, indent=2, ensure_ascii=False)]
