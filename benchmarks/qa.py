"""Question answering with a real reader: the packaged Gemma 3 270M (base, Q4_K_M GGUF) behind
llama-cpp-python's OpenAI-compatible server, queried by the project's OpenAI client.

    python -m benchmarks.qa                                   # dev: 100 questions per dataset, 5 rows, agreement sample
    python -m benchmarks.qa --split train --rows dense oracle --templates fewshot fewshot+passage_order=ranked   # prompt tuning

Rows, the same questions in each: the reader given no passages (``closed_book``), flat dense
top-5 (``dense``), ISO-RAG top-5 (``iso``), global PPR top-5 (``ppr``), and the gold passages
(``oracle``). Retrieval uses the default knobs (conf/retriever/iso.yaml, ppr.yaml, dense.yaml: the library's defaults on this graph) and
the title-mention graph. Per row: EM, F1, average prompt tokens (the server's count), seconds per
question (one request at a time per server, wall clock), llama.cpp's prompt and generation
tokens/s (its own timings; prompt tokens are those after the few-shot prefix reused from the
previous prompt), how often a gold answer appears verbatim (normalised) in the passages, and
the citations as the product reads them (:func:`~isorag_pyg.qa.answering.answer_json`): the share
of answers citing anything, the share citing a gold passage, and the share of citing answers
whose first cited passage holds the answer's first claim (it names where the answer came from).
The server runs with :class:`~isorag_pyg.qa.llama_server.ReaderSettings` (``--threads`` per server). ``--agreement N`` also asks the same model through transformers
(the GGUF de-quantized) with the first N prompts of each row of each dataset, and counts
identical greedy answers. ``--split train`` runs on the training questions (minus the template's
few-shot examples): the prompt was tuned that way, never on the dev questions.
Writes benchmarks/results/qa.json (or ``--out``).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Spread,
    add_override_argument,
    evaluation,
    make_retriever,
    reader_config,
    results_name,
    retriever_config,
    template,
    throughput,
    write_json,
)
from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.qa import OpenAIChatGenerator, PromptTemplate, TransformersGenerator, answer_questions, normalize_answer
from isorag_pyg.qa.answering import answer_json
from isorag_pyg.qa.citations import claims, matched_number
from isorag_pyg.qa.llama_server import LlamaServer, ReaderSettings
from isorag_pyg.qa.models import packaged_gemma

ROWS = ["closed_book", "dense", "iso", "ppr", "oracle"]


def rankings(dataset: str, rows: list[str], k: int, split: str, max_questions: int,
             overrides: list[str]) -> tuple[list[Question], dict[str, list[list[Passage]]]]:
    """The questions and, per row, each question's passages (best first): none, a retriever's
    top ``k`` (its default config) or the gold passages."""
    inputs, _ = evaluation(f"dataset={dataset}", "graph=title_mention", f"split={split}", f"max_questions={max_questions}", *overrides)
    questions, passages = inputs.dataset.questions, inputs.index.passages
    out: dict[str, list[list[Passage]]] = {}
    for row in rows:
        if row == "closed_book":
            out[row] = [[] for _ in questions]
        elif row == "oracle":
            out[row] = [[passages[passages.row_of(g)] for g in q.gold_ids] for q in questions]
        else:
            result = make_retriever(inputs, retriever_config(row)).retrieve(inputs.queries, k)
            out[row] = [[passages[i] for i in ranked] for ranked in result.indices.tolist()]
    return questions, out


def answer_in_passages(question: Question, passages: list[Passage]) -> bool:
    """A gold answer (normalised) occurs in the passages' normalised text."""
    text = f" {normalize_answer(' '.join(p.title + ' ' + p.text for p in passages))} "
    return any(f" {a} " in text for a in map(normalize_answer, question.answers) if a)


def first_citation_holds_claim(question: str, answer: dict[str, Any], passages: list[Passage]) -> bool:
    """An answer object's first citation holds its first claim (the whole answer without markers)."""
    claim = next((c for c, _ in claims(answer["answer"], len(passages))), answer["answer"])
    cited = passages[answer["citations"][0]["n"] - 1]
    return matched_number(claim, [f"{cited.title} {cited.text}"], question) == 1


def score_row(generator, servers: list[LlamaServer], prompt: PromptTemplate, questions: list[Question],
              passages: list[list[Passage]]) -> dict[str, Any]:
    done = [len(s.timings()) for s in servers]
    start = time.perf_counter()
    metrics, answers = answer_questions(generator, prompt, questions, passages)
    seconds = time.perf_counter() - start
    timings = [t for s, n in zip(servers, done) for t in s.timings()[n:]]
    objects = [answer_json(q.text, a["answer"], ps, len(ps), {}) for q, a, ps in zip(questions, answers, passages)]
    cited = [{c["id"] for c in o["citations"]} for o in objects]
    first = [first_citation_holds_claim(q.text, o, ps) for q, o, ps in zip(questions, objects, passages) if o["citations"]]
    return {"em": metrics["em"], "f1": metrics["f1"], "avg_prompt_tokens": metrics["avg_prompt_tokens"],
            "seconds_per_question": seconds / len(questions), **throughput(timings),
            "answer_in_passages": sum(map(answer_in_passages, questions, passages)) / len(questions),
            "citing_answers": sum(map(bool, cited)) / len(questions),
            "citation_gold_hit": sum(bool(c & set(q.gold_ids)) for c, q in zip(cited, questions)) / len(questions),
            "first_citation_holds_claim": sum(first) / len(first) if first else None,
            "answers": [a["answer"] for a in answers]}


def agreement(reader: TransformersGenerator, prompt: PromptTemplate, sample: list[tuple[Question, list[Passage], str]]) -> dict[str, Any]:
    """The same prompts through transformers: how many greedy answers equal the server's."""
    start = time.perf_counter()
    local = reader.generate([prompt.request(q.text, p) for q, p, _ in sample])
    seconds = time.perf_counter() - start
    same = [r["answer"] == served for r, (_, _, served) in zip(local, sample)]
    same_normalised = [normalize_answer(r["answer"]) == normalize_answer(served) for r, (_, _, served) in zip(local, sample)]
    disagreements = [{"question": q.text, "server": served, "transformers": r["answer"]}
                     for r, (q, _, served), equal in zip(local, sample, same) if not equal]
    return {"prompts": len(sample), "identical": sum(same) / len(sample), "identical_normalised": sum(same_normalised) / len(sample),
            "transformers_seconds_per_question": seconds / len(sample), "disagreements": disagreements}


def header(args: argparse.Namespace, model: Path, stop: list[str], max_tokens: int, k: int, prompts: dict[str, PromptTemplate],
           settings: ReaderSettings) -> dict[str, Any]:
    """What was run: split, reader, decoding, retrieval and the prompt templates."""
    return {"split": args.split, "reader": {"model": model.name, "decoding": "greedy", "stop": stop, "max_tokens": max_tokens, "top_k_passages": k,
                                            "server": f"llama-cpp-python server, /v1/completions, {args.servers} process(es)",
                                            "settings": dataclasses.asdict(settings)},
            "retrieval": "default knobs (conf/retriever/iso.yaml, ppr.yaml, dense.yaml), title-mention graph",
            "templates": {name: dataclasses.asdict(p) for name, p in prompts.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS)
    parser.add_argument("--split", choices=["dev", "train"], default="dev")
    parser.add_argument("--max-questions", type=int, default=100)
    parser.add_argument("--templates", nargs="+", default=["fewshot"], help="NAME[+KEY=VALUE...] of conf/qa/template (the first is the reported one)")
    parser.add_argument("--agreement", type=int, default=8, help="prompts per row and dataset also answered through transformers (0: none)")
    parser.add_argument("--servers", type=int, default=1, help="llama.cpp server processes sharing each row's questions")
    parser.add_argument("--threads", type=int, default=ReaderSettings().threads, help="llama.cpp threads per server (default: every core)")
    parser.add_argument("--out", type=results_name, default="qa.json", help="file name under benchmarks/results/")
    add_override_argument(parser)
    args = parser.parse_args()
    if args.max_questions < 1 or args.servers < 1 or args.threads < 1 or args.agreement < 0:
        parser.error("--max-questions, --servers and --threads must be >= 1, --agreement >= 0")  # 0 questions would have meant all of them
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still stops its servers
    reader = reader_config()
    stop, max_tokens, k = list(reader["stop"]), int(reader["max_tokens"]), int(reader["top_k"])
    prompts = {name: template(name) for name in args.templates}
    shots = {e["question"] for p in prompts.values() for e in p.examples}
    model = packaged_gemma()
    settings = ReaderSettings(threads=args.threads)
    results: dict[str, Any] = {}
    reader: list[TransformersGenerator] = []  # loaded on first use
    with ExitStack() as stack:
        servers = [stack.enter_context(LlamaServer(model, alias="gemma-3-270m", settings=settings)) for _ in range(args.servers)]
        generator = Spread([OpenAIChatGenerator(s.base_url, s.model, concurrency=1, max_retries=2, timeout=600, temperature=0.0,
                                                max_tokens=max_tokens, stop=stop) for s in servers])
        generator.generate([prompts[args.templates[0]].request("What is the capital of France?", [])] * args.servers)  # warm-up, not timed
        for dataset in args.datasets:
            questions, passages = rankings(dataset, args.rows, k, args.split, args.max_questions, args.override)
            keep = [i for i, q in enumerate(questions) if q.text not in shots]
            questions = [questions[i] for i in keep]
            passages = {row: [ranked[i] for i in keep] for row, ranked in passages.items()}
            entry: dict[str, Any] = {"n_questions": len(questions), "question_ids": [q.id for q in questions], "templates": {}}
            for name, prompt in prompts.items():
                rows = {row: score_row(generator, servers, prompt, questions, passages[row]) for row in args.rows}
                entry["templates"][name] = rows
                print(f"\n{dataset} ({args.split}, {len(questions)} questions), template {name}")
                print(f"  {'row':12s} {'EM':>6s} {'F1':>6s} {'tokens':>7s} {'s/q':>6s} {'prompt t/s':>10s} {'gen t/s':>8s} {'ans in P':>8s} {'citing':>6s} {'cite-gold':>9s} {'1st holds':>9s}")
                for row, m in rows.items():
                    print(f"  {row:12s} {m['em']:6.3f} {m['f1']:6.3f} {m['avg_prompt_tokens']:7.1f} {m['seconds_per_question']:6.2f} "
                          f"{m['prompt_tokens_per_s'] or 0:10.1f} {m['generation_tokens_per_s'] or 0:8.1f} {m['answer_in_passages']:8.3f} "
                          f"{m['citing_answers']:6.2f} {m['citation_gold_hit']:9.3f} {m['first_citation_holds_claim'] or 0:9.3f}", flush=True)
            if args.agreement:
                reader = reader or [TransformersGenerator(model, max_new_tokens=max_tokens, batch_size=8, stop=stop)]
                served = entry["templates"][args.templates[0]]
                sample = [(questions[i], passages[row][i], served[row]["answers"][i]) for row in args.rows for i in range(min(args.agreement, len(questions)))]
                entry["agreement"] = agreement(reader[0], prompts[args.templates[0]], sample)
                print(f"  transformers vs server, {len(sample)} prompts: identical {entry['agreement']['identical']:.3f} "
                      f"(after normalisation {entry['agreement']['identical_normalised']:.3f})", flush=True)
            results[dataset] = entry
            write_json(args.out, {**header(args, model, stop, max_tokens, k, prompts, settings), "complete": False, "results": results})  # progress
    write_json(args.out, {**header(args, model, stop, max_tokens, k, prompts, settings), "complete": True, "results": results})

if __name__ == "__main__":
    main()
