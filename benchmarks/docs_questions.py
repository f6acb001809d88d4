"""Retrieval on this repository's own docs: where each retriever ranks the passage that answers
a question about the docs' tables, measured side by side on one index.

    python -m benchmarks.docs_questions [--docs docs] [--k 100]

The index is what ``isorag index docs/ idx`` builds (the default encoder, the automatic graph,
``max_tokens`` 200), from a copy of the folder without the text that would answer the
questions by quoting them: the record of ``isorag ask`` on the docs (in ``index.md``, from
:data:`RECORD_START` to the next ``##`` heading) and this benchmark's own page. Questions
(:data:`QUESTIONS`): the three of that record, the six of the two records before it, and
thirteen written, before any measurement, one for each of thirteen table rows drawn at random
from the docs outside ``benchmarks/`` (each record's three were written so too, for the first
three rows of another seeded draw that are no header). A
question's gold passages are those of its file that hold its answer's words (``needle``); a
question whose needle no passage holds is an error, so edits to the docs cannot silently
empty the benchmark. Per retriever (and ISO-RAG on the same graph built by an extractor blind to
Markdown code spans, :data:`NO_CODE`, and without the hybrid with BM25, :data:`NO_LEXICAL`): the
rank of the first gold passage (beyond ``--k``: missed), how many questions find one in the top
5 and top 10 of that ranking and in the 5 passages asked for with ``k = 5`` (ISO-RAG's pool,
hence its ranking, grows with ``k``), and the mean reciprocal rank. ``--split train`` asks :data:`TRAIN_QUESTIONS`
instead, what ``lexical_weight`` was chosen on (``--lexical-weights 0 0.25 ...``: a row per weight). ``--answers``
also asks a reader (the packaged Gemma 3 270M, or ``--llm-base-url URL --llm-model NAME``) each question over
ISO-RAG's 5 passages, as ``isorag ask`` does, and counts the answers that cite a gold passage. Writes
benchmarks/results/docs_questions.json (``docs_questions_train.json``).
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
from isorag_pyg.qa.generators import GeneratorError
from isorag_pyg.qa.llama_server import ServerError
from isorag_pyg.qa.reader_spec import Reader, ReaderSpec

RETRIEVERS = ("dense", "bm25", "ppr", "iso")
#: ISO-RAG without the hybrid with BM25 (``lexical_weight`` 0), on the same index (an ablation).
NO_LEXICAL = "iso_no_lexical"
#: ISO-RAG on the same graph built by an extractor that does not read code spans, hence without the hybrid either (an ablation).
NO_CODE = "iso_no_code"
RECORD_START = "**On this repository's own docs**"
OWN_PAGE = "benchmarks/docs_questions.md"
# (question, the docs file that answers it, words of the answer that only its passages hold, origin)
QUESTIONS: list[tuple[str, str, str, str]] = [
    ("What is ISO-RAG's default Recall@5 on MuSiQue in the comparison with HippoRAG 2's walk?", "paper.md", "**0.705** | **0.925**", "record"),
    ("What happens to a question that holds a lone surrogate?", "reliability.md", "a question with a lone surrogate (invalid Unicode)", "record"),
    ("What happens when an index's ball coordinates lie outside the Poincaré ball?", "reliability.md",
     "ball coordinates outside the Poincaré ball", "record"),
    ("Where does the OpenIE extractor keep its answer cache by default?", "graphs.md", "folder of the answer cache", "earlier record"),
    ("When does the automatic graph add the entity graph?", "graphs.md", "title-mention edges touch less than", "earlier record"),
    ("When does the automatic graph use title mentions?", "graphs.md", "occurs (whole words) in another passage", "earlier record"),
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

#: Training questions (``--split train``), what the hybrid with BM25 (``lexical_weight``) was chosen on: written, before
#: any measurement, for the first fifteen rows of a third seeded draw that are neither a header row, a row of
#: timings alone, nor a row a question above already asks about.
TRAIN_QUESTIONS: list[tuple[str, str, str, str]] = [
    ("How many questions may one request to the server carry by default?", "server.md", "questions per request", "train"),
    ("How many new tokens may the OpenIE extractor's answers have?", "graphs.md", "new tokens per answer at most", "train"),
    ("Which values can phi_mode take?", "configuration.md", "`real`, or the ablations `uniform`, `shuffled`, `random`", "train"),
    ("Which Host names does the server answer by default?", "server.md", "another `Host` name to answer", "train"),
    ("What happens when an update removes every passage?", "reliability.md", "removing every passage, is a `ValueError`", "train"),
    ("What does retrieve do when k is smaller than 1?", "reliability.md", "questions that are not a non-empty list of strings", "train"),
    ("Where do the supporting titles come from in the official HotpotQA format?", "datasets.md",
     "supporting titles, text from the question's context", "train"),
    ("What happens to a footer that most passages carry?", "reliability.md", "is boilerplate: no node", "train"),
    ("Which file holds the index's read side?", "index.md", "its read side (encoder, retrievers", "train"),
    ("How many questions may wait for the server's worker before it answers 503?", "server.md",
     "questions waiting for the worker", "train"),
    ("Where do the benchmarks share their code?", "index.md", "what they share in `benchmarks/common.py`", "train"),
    ("What does the server answer when no reader is configured?", "reliability.md", "the server: 503 with the retrieved passages", "train"),
    ("What happens when the same text is added under two ids?", "reliability.md", "merged; kept and dropped ids in the log", "train"),
    ("What happens when a FAISS probe finds fewer than L passages?", "reliability.md", "falls back to the exact scan", "train"),
    ("What is the default backlink_weight?", "configuration.md",
     "the share of its transition probability at which the walk follows a one-way title mention backwards", "train"),
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


def answers(index: ISORAGIndex, texts: list[str], golds: list[set[str]], reader: Reader) -> dict[str, Any]:
    """Each question answered by ``reader`` over ISO-RAG's 5 passages (as ``isorag ask`` asks it):
    the answers, their cited ids, how many cite a gold passage, and how many had one among their 5."""
    found = index.answer(texts, k=5, retriever="iso", reader=reader)
    cited = [[c["id"] for c in a["citations"]] for a in found]
    given = [bool({p["id"] for p in a["passages"]} & gold) for a, gold in zip(found, golds)]
    cites_gold = [bool(set(ids) & gold) for ids, gold in zip(cited, golds)]
    return {"reader": reader.name, "cite_gold": sum(cites_gold), "gold_given": sum(given),
            "answers": [{"question": a["question"], "answer": a["answer"], "cited": ids, "cites_gold": hit}
                        for a, ids, hit in zip(found, cited, cites_gold)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parents[1] / "docs", help="the docs folder")
    parser.add_argument("--k", type=int, default=100, help="ranks beyond this count as missed")
    parser.add_argument("--split", choices=("test", "train"), default="test", help="QUESTIONS (test) or TRAIN_QUESTIONS (train)")
    parser.add_argument("--questions", type=Path, help="a JSON list of [question, file, needle, origin] instead of the split's")
    parser.add_argument("--lexical-weights", type=float, nargs="*", default=[], metavar="W",
                        help="also ISO-RAG with each of these lexical_weight values (rows iso_lexical_W): the choice of the weight")
    parser.add_argument("--answers", action="store_true", help="also ask a reader each question over ISO-RAG's 5 passages")
    parser.add_argument("--llm-base-url", default=None, metavar="URL", help="with --answers: an OpenAI-compatible reader (default: the packaged Gemma)")
    parser.add_argument("--llm-model", default=None, metavar="NAME", help="the reader's model name at --llm-base-url")
    parser.add_argument("--out", type=results_name, help="results file (default: docs_questions.json, docs_questions_train.json)")
    args = parser.parse_args()
    if (args.llm_base_url or args.llm_model) and not args.answers:
        raise SystemExit("--llm-base-url and --llm-model name the reader of --answers: add --answers")
    try:
        spec = ReaderSpec.from_flags(None, args.llm_base_url, args.llm_model, None) if args.answers else None
    except ValueError as err:  # the spec's own checks (an endpoint needs its model name, and the reverse)
        raise SystemExit(f"--answers: {err}") from None
    if args.k < 1:
        raise SystemExit(f"--k must be >= 1, got {args.k}")
    if any(not 0 <= weight < float("inf") for weight in args.lexical_weights):
        raise SystemExit(f"--lexical-weights must be finite numbers >= 0, got {args.lexical_weights}")
    split = TRAIN_QUESTIONS if args.split == "train" else QUESTIONS
    questions = [tuple(q) for q in json.loads(args.questions.read_text())] if args.questions else split
    out = args.out or ("docs_questions_train.json" if args.split == "train" else "docs_questions.json")
    if not questions or any(len(q) != 4 or not all(isinstance(x, str) for x in q) for q in questions):
        raise SystemExit("--questions must hold a non-empty JSON list of [question, file, needle, origin] strings")
    reader = None
    try:
        if spec is not None:
            reader = spec.make()
            _ = reader.generator  # started now (the packaged reader's llama.cpp server): one that cannot start fails before the index is built
        measure(args, questions, out, reader)
    except (GeneratorError, ServerError) as err:  # not installed, did not start, refused, timed out or answered garbage
        raise SystemExit(f"--answers: {err}") from None
    finally:
        if reader is not None:
            reader.close()


def measure(args: argparse.Namespace, questions: list[tuple[str, str, str, str]], out: str, reader: Reader | None) -> None:
    """Build the index of the docs, rank every question with every retriever (and ask ``reader``), write ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        passages = ISORAGIndex.read_corpus(docs_without_answers(args.docs, Path(tmp)))
        index = ISORAGIndex.build(passages, f_theta=None, phi=PhiSpec(p=0), progress=False)
        build_s = time.perf_counter() - start
        rows: list[tuple[str, ISORAGIndex, str, dict[str, Any]]] = [(name, index, name, {}) for name in RETRIEVERS]  # (row, index, retriever, knobs)
        if index.knobs.get("iso", {}).get("lexical_weight", 0) > 0:
            rows.append((NO_LEXICAL, index, "iso", {"lexical_weight": 0.0}))
        rows += [(f"iso_lexical_{weight:g}", index, "iso", {"lexical_weight": weight}) for weight in args.lexical_weights]
        spec = {name: dict(kwargs) for name, kwargs in index.graph_spec.items()}
        if "entity_graph" in spec:  # the same graph, its extractor blind to code spans
            spec["entity_graph"]["extractor_args"] = {**spec["entity_graph"].get("extractor_args", {}), "code_spans": False}
            rows.append((NO_CODE, ISORAGIndex.build(passages, graph=spec, f_theta=None, phi=PhiSpec(p=0), progress=False), "iso", {}))
    golds = [gold_ids(index, doc, needle) for _, doc, needle, _ in questions]
    texts = [q for q, _, _, _ in questions]
    results: dict[str, Any] = {}
    for row, built, retriever, knobs in rows:
        hits = built.retrieve(texts, k=min(args.k, len(index.passages)), retriever=retriever, **knobs)
        asked = built.retrieve(texts, k=5, retriever=retriever, **knobs)  # ISO-RAG's pool, hence its top 5, depends on k
        ranks_asked = [first_rank([h.id for h in found], gold) for found, gold in zip(asked, golds)]
        results[row] = summary([first_rank([h.id for h in found], gold) for found, gold in zip(hits, golds)]) | {
            "top5_asked": sum(r is not None for r in ranks_asked), "ranks_asked": ranks_asked}
    print(f"{len(index.passages)} passages, {len(questions)} questions; first gold passage's rank (-: beyond {args.k})")
    print(f"{'retriever':16s} {'k = 5':>6s} {'top 5':>6s} {'top 10':>7s} {'MRR':>6s}  ranks (k = {args.k})")
    for name, row in results.items():
        ranks = " ".join("-" if r is None else str(r) for r in row["ranks"])
        print(f"{name:16s} {row['top5_asked']:>6d} {row['top5']:>6d} {row['top10']:>7d} {row['mrr']:>6.3f}  {ranks}")
    asked = answers(index, texts, golds, reader) if reader is not None else None
    if asked is not None:
        print(f"{asked['reader']}: {asked['cite_gold']} of {len(questions)} answers cite a gold passage "
              f"({asked['gold_given']} had one among ISO-RAG's 5)")
    write_json(out, {"protocol": __doc__.split("\n\n")[1], "split": "questions file" if args.questions else args.split,
                     "passages": len(index.passages), "graph": index.graph_spec, "knobs": index.knobs, "build_s": round(build_s, 1),
                     "k": args.k, "questions": [{"question": q, "file": f, "needle": n, "origin": o, "gold": sorted(g)}
                                                for (q, f, n, o), g in zip(questions, golds)],
                     "retrievers": results, "answers": asked})


if __name__ == "__main__":
    main()
