"""``isorag ask``: one question answered by a reader over an index's passages, streamed to stdout
with numbered citations, then the cited sources; from the index itself, or from a running
``isorag serve`` of it (``--server``)."""
from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

#: Characters of a source's first line shown under the answer.
SOURCE_CHARS = 160


def run_ask(args: argparse.Namespace) -> Iterator[str]:
    """The answer's pieces as they come, then its sources (``--json``: the answer object)."""
    from isorag_pyg.index.registry import check_retriever_name
    from isorag_pyg.retrieval.types import check_questions

    check_questions([args.question])
    check_retriever_name(args.retriever)
    if args.k < 1:
        raise ValueError(f"k must be a positive integer, got {args.k}")
    if args.server:
        from isorag_pyg.cli.remote import served_answer

        events = served_answer(args.server, args.index_dir, args.question, args.k, args.retriever, stream=not (args.json or args.no_stream))
    else:
        events = _local_answer(args)
    result: dict[str, Any] = {}
    streamed = False
    for kind, data in events:
        if kind == "token":
            streamed = True
            yield data["text"]
        elif kind == "done":
            result = data
    if args.json:
        yield json.dumps(result, ensure_ascii=False) + "\n"
        return
    yield ("" if streamed else result["answer"]) + "\n\n" + "".join(f"{line}\n" for line in sources(result))


def _local_answer(args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any]]]:
    """``("token", {"text"})`` events while the reader answers, then ``("done", answer object)``."""
    import torch

    from isorag_pyg.index import open_index
    from isorag_pyg.qa.reader_spec import ReaderSpec

    spec = ReaderSpec.from_flags(args.llm, args.llm_base_url, args.llm_model, args.llm_api_key_env, args.llm_timeout)
    reader = spec.make()  # no reader: one line saying how to get one, before the index is opened
    torch.set_num_threads(1)
    with reader:
        index = open_index(args.index_dir, verify=not args.no_verify)
        if args.json or args.no_stream:
            yield "done", index.answer([args.question], k=args.k, retriever=args.retriever, reader=reader)[0]
            return
        answering = index.answer_stream(args.question, reader, k=args.k, retriever=args.retriever)
        try:
            for piece in answering.pieces():
                yield "token", {"text": piece}
        finally:
            answering.cancel()
        yield "done", answering.result or {}


def sources(result: dict[str, Any]) -> list[str]:
    """The cited passages (id, title, first line; ", matched to the answer" where the citation is
    the passage holding the answer, not the answer's marker), or the retrieved ones when none is cited."""
    by = {c["n"]: c["by"] for c in result.get("citations", [])}
    cited = set(by)
    shown = [p for p in result.get("passages", []) if p["n"] in cited] if cited else result.get("passages", [])
    lines = ["Sources:" if cited else "No passage cited; retrieved:"]
    for p in sorted(shown, key=lambda p: list(by).index(p["n"]) if cited else p["n"]):
        first = p["text"].strip().splitlines()[0] if p["text"].strip() else ""
        first = first if len(first) <= SOURCE_CHARS else first[:SOURCE_CHARS - 3] + "..."
        matched = ", matched to the answer" if by.get(p["n"]) == "match" else ""
        lines.append(f"  [{p['n']}] {p['title']} ({p['id']}){matched}: {first}")
    return lines
