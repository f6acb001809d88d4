"""``isorag query|info``: read a saved index."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from isorag_pyg.cli.start_time import STARTED
from isorag_pyg.cli.update import bridge_line


def run_query(args: argparse.Namespace) -> list[str]:
    """Retrieve for each question: ranked lines, or one JSON object a question with ``--json``; from
    the index opened for querying (:func:`~isorag_pyg.index.index.open_index`) or, with
    ``--server``, from a server of it (:mod:`~isorag_pyg.cli.remote`)."""
    timings: dict[str, Any] = {}
    if args.server:
        from isorag_pyg.cli.remote import served_answers

        timings["imports_s"] = time.perf_counter() - STARTED
        start = time.perf_counter()
        answers = served_answers(args.server, args.index_dir, args.questions, args.k, args.retriever)
        timings["server_s"] = time.perf_counter() - start
    else:
        answers = _answers(args, timings)
    if args.timings:
        timings["total_s"] = time.perf_counter() - STARTED
        print(json.dumps(timings), file=sys.stderr)
    return _lines(answers, args.json)


def _answers(args: argparse.Namespace, timings: dict[str, Any]) -> list[dict[str, Any]]:
    """Each question's ``{"question", "results"}`` from the index itself; ``timings`` gains the
    seconds of each step and the encoder's backend."""
    import torch

    from isorag_pyg.index import open_index
    from isorag_pyg.index.results import answer_json

    timings["imports_s"] = time.perf_counter() - STARTED
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    index = open_index(args.index_dir, verify=not args.no_verify)
    timings["load_s"] = time.perf_counter() - start
    start = time.perf_counter()
    index.encoder.encode(["warm-up"])  # model load, timed apart from retrieval
    timings["model_s"], timings["encoder"] = time.perf_counter() - start, f"{type(index.encoder).__name__} ({index.encoder.backend})"
    start = time.perf_counter()
    hits = index.retrieve(args.questions, k=args.k, retriever=args.retriever)
    timings["retrieval_s"], timings["threads"] = time.perf_counter() - start, torch.get_num_threads()
    return [answer_json(question, results) for question, results in zip(args.questions, hits)]


def _lines(answers: Sequence[dict[str, Any]], as_json: bool) -> list[str]:
    """One JSON object an answer, or the question and its ranked passages (texts cut at 160 characters)."""
    if as_json:
        return [json.dumps(answer, ensure_ascii=False) for answer in answers]
    lines = []
    for answer in answers:
        lines.append(f"Q: {answer['question']}")
        for rank, r in enumerate(answer["results"], 1):
            text = r["text"] if len(r["text"]) <= 160 else r["text"][:157] + "..."
            lines.append(f"  {rank}. [{r['score']:.3f}] {r['title']} ({r['id']}): {text}")
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
