"""Retrieval on this repository's own docs: where each retriever ranks the passage that answers
a question about the docs' tables, measured side by side on one index.

    python -m benchmarks.docs_questions [--docs docs] [--k 100]

The index is what ``isorag index docs/ idx`` builds (the default encoder, the automatic graph,
``max_tokens`` 200), from a copy of the folder without the text that would answer the
questions by quoting them: the record of ``isorag ask`` on the docs (in ``index.md``, from
:data:`RECORD_START` to the next ``##`` heading) and this benchmark's own page. Questions
(:data:`QUESTIONS`): the three of that record, the three of the record before it, and thirteen
written, before any measurement, one for each of thirteen table rows drawn at random from the
docs outside ``benchmarks/`` (the record's three were written so too, for the first three rows
of a second seeded draw that are no header). A
question's gold passages are those of its file that hold its answer's words (``needle``); a
question whose needle no passage holds is an error, so edits to the docs cannot silently
empty the benchmark. Per retriever (and ISO-RAG on the same graph built by an extractor blind to
Markdown code spans, :data:`NO_CODE`): the rank of the first gold passage (beyond ``--k``:
missed), how many questions find one in the top 5 and top 10, and the mean reciprocal rank.
Writes benchmarks/results/docs_questions.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import results_name, write_json
from isorag_pyg import ISORAGIndex, PhiSpec

RETRIEVERS = ("dense", "bm25", "ppr", "iso")
#: ISO-RAG on the same graph built by an extractor that does not read code spans (an ablation).
NO_CODE = "iso_no_code"
RECORD_START = "**On this repository's own docs**"
OWN_PAGE = "benchmarks/docs_questions.md"
# (question, the docs file that answers it, words of the answer that only its passages hold, origin)
QUESTIONS: list[tuple[str, str, str, str]] = [
    ("Where does the OpenIE extractor keep its answer cache by default?", "graphs.md", "folder of the answer cache", "record"),
    ("When does the automatic graph add the entity graph?", "graphs.md", "title-mention edges touch less than", "record"),
    ("When does the automatic graph use title mentions?", "graphs.md", "occurs (whole words) in another passage", "record"),
    ("What is the largest k the server accepts by default?", "server.md", "largest `k`", "earlier record"),
    ("How many seconds may a connection take to send its request before the server closes it?", "server.md",
     "seconds a connection has, from its accept", "earlier record"),
    ("What is ISO-RAG's default alpha for its PPR walk?", "configuration.md", "PPR's probability of following an edge", "earlier record"),
    ("How large are the index files at ten million passages?", "scale.md", "the files are ~40 GB", "sampled"),
    ("What status does the server return for a write not sent as application/json?", "server.md",
     "POST requests must be sent as application/json", "sampled"),
    ("Which file holds the entity extractors?", "index.md", "`isorag_pyg/graph/extractors.py` (`EXTRACTORS`)", "sampled"),
    ("Where is the scoring formula implemented?", "index.md", "`isorag_pyg/retrieval/scoring.py` (`score_local_graphs`)", "sampled"),
    ("What does the server answer to a request body that is not UTF-8?", "server.md", "body that is not UTF-8", "sampled"),
    ("Which encoder backend can the server use for an onnx-int8 index?", "server.md", "an `onnx-int8` index only takes", "sampled"),
    ("Where does the isoperimetric filter's rule live in the code?", "index.md", "the isoperimetric filter's rule and φ", "sampled"),
    ("Which JSON formats can I index as my own corpus?", "datasets.md", "list of `{title, text[, id]}`", "sampled"),
    ("How long does computing φ take for ten million passages?", "scale.md", "97 s × 12.5", "sampled"),
    ("What happens when a PPR batch's nodes are not grouped by graph?", "reliability.md", "a PPR batch whose nodes are not grouped", "sampled"),
    ("What does the grounded argument of the OpenIE extractor do?", "graphs.md", "keep only the entities (named, or a triple's subject", "sampled"),
    ("What is the default WANDB_MODE?", "configuration.md", "`offline` (set by the wandb logger config)", "sampled"),
    ("What is ISO-RAG's seed knob used for?", "configuration.md", "seed of the `shuffled` and `random` ablations", "sampled"),
]


def docs_without_answers(docs: Path, into: Path) -> Path:
    """A copy of ``docs`` in ``into`` without the record of ``isorag ask`` and this benchmark's page."""
    copy = into / "docs"
    shutil.copytree(docs, copy)
    (copy / OWN_PAGE).unlink(missing_ok=True)
    index_md = copy / "index.md"
    text = index_md.read_text(encoding="utf-8")
    start = text.find(RECORD_START)
    if start < 0:
        raise SystemExit(f"{docs / 'index.md'} has no record starting {RECORD_START!r}: update RECORD_START")
    end = text.find("\n## ", start)
    index_md.write_text(text[:start] + (text[end:] if end >= 0 else ""), encoding="utf-8")
    return copy


def gold_ids(index: ISORAGIndex, doc: str, needle: str) -> set[str]:
    """The passages of ``doc`` that hold ``needle`` (an error when none does)."""
    gold = {p.id for p in index.passages if p.id.split("#")[0] == doc and needle in " ".join(p.text.split())}
    if not gold:
        raise SystemExit(f"no passage of {doc} holds {needle!r}: the docs changed, update QUESTIONS")
    return gold


def first_rank(ids: list[str], gold: set[str]) -> int | None:
    """1-based rank of the first gold id, ``None`` when none is retrieved."""
    return next((rank for rank, pid in enumerate(ids, 1) if pid in gold), None)


def summary(ranks: list[int | None]) -> dict[str, Any]:
    return {"top5": sum(r is not None and r <= 5 for r in ranks), "top10": sum(r is not None and r <= 10 for r in ranks),
            "mrr": sum(1 / r for r in ranks if r is not None) / len(ranks), "ranks": ranks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parents[1] / "docs", help="the docs folder")
    parser.add_argument("--k", type=int, default=100, help="ranks beyond this count as missed")
    parser.add_argument("--questions", type=Path, help="a JSON list of [question, file, needle, origin] instead of QUESTIONS")
    parser.add_argument("--out", type=results_name, default="docs_questions.json")
    args = parser.parse_args()
    if args.k < 1:
        raise SystemExit(f"--k must be >= 1, got {args.k}")
    questions = [tuple(q) for q in json.loads(args.questions.read_text())] if args.questions else QUESTIONS
    if not questions or any(len(q) != 4 or not all(isinstance(x, str) for x in q) for q in questions):
        raise SystemExit("--questions must hold a non-empty JSON list of [question, file, needle, origin] strings")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        passages = ISORAGIndex.read_corpus(docs_without_answers(args.docs, Path(tmp)))
        index = ISORAGIndex.build(passages, f_theta=None, phi=PhiSpec(p=0), progress=False)
        build_s = time.perf_counter() - start
        rows = [(name, index, name) for name in RETRIEVERS]  # (row, index, retriever)
        spec = {name: dict(kwargs) for name, kwargs in index.graph_spec.items()}
        if "entity_graph" in spec:  # the same graph, its extractor blind to code spans
            spec["entity_graph"]["extractor_args"] = {**spec["entity_graph"].get("extractor_args", {}), "code_spans": False}
            rows.append((NO_CODE, ISORAGIndex.build(passages, graph=spec, f_theta=None, phi=PhiSpec(p=0), progress=False), "iso"))
    golds = [gold_ids(index, doc, needle) for _, doc, needle, _ in questions]
    texts = [q for q, _, _, _ in questions]
    results: dict[str, Any] = {}
    for row, built, retriever in rows:
        hits = built.retrieve(texts, k=min(args.k, len(index.passages)), retriever=retriever)
        results[row] = summary([first_rank([h.id for h in found], gold) for found, gold in zip(hits, golds)])
    print(f"{len(index.passages)} passages, {len(questions)} questions; first gold passage's rank (-: beyond {args.k})")
    print(f"{'retriever':12s} {'top 5':>6s} {'top 10':>7s} {'MRR':>6s}  ranks")
    for name, row in results.items():
        ranks = " ".join("-" if r is None else str(r) for r in row["ranks"])
        print(f"{name:12s} {row['top5']:>6d} {row['top10']:>7d} {row['mrr']:>6.3f}  {ranks}")
    write_json(args.out, {"protocol": __doc__.split("\n\n")[1], "passages": len(index.passages), "graph": index.graph_spec,
                          "build_s": round(build_s, 1),
                          "k": args.k, "questions": [{"question": q, "file": f, "needle": n, "origin": o, "gold": sorted(g)}
                                                     for (q, f, n, o), g in zip(questions, golds)],
                          "retrievers": results})


if __name__ == "__main__":
    main()
