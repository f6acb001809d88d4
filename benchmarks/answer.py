"""Answers, not only passages: the product's answering path with the packaged reader (Gemma 3 270M
through llama.cpp's server, as ``isorag ask`` starts it by default), measured against the harness.

    python -m benchmarks.answer                                        # the issue's sizes: 100 questions a dev set, 100 latency questions
    python -m benchmarks.answer --questions 10 --latency-questions 10 --clients 1 4 --datasets musique

1. **Product = harness**, per dev set and retriever (dense, PPR, ISO-RAG; their conf/retriever
   configs, the title-mention graph, k = 5): the same questions through ``benchmarks/qa.py``'s path
   (``answer_questions`` with the few-shot template over the retriever's top k, one llama.cpp server
   asked by ``OpenAIChatGenerator``) and through ``ISORAGIndex.answer`` with the default
   ``ReaderSpec()`` (its own llama.cpp server): EM and F1 of each, the share of identical answers
   and of identical passage lists.
2. **Citations**, per retriever: the share of answers whose citations include a gold passage, the
   share citing anything, the share of citations inside the retrieved set, beside Recall@5.
3. **Latency**: ``isorag serve`` of the first dev set's index with the packaged reader, warm;
   time to first token and total, p50 / p95, through ``POST /answer`` (streamed) and through
   ``isorag ask --server`` (first byte on stdout, exit).
4. **Throughput**: answers/s with 1, 4 and 16 concurrent clients of ``POST /answer``, and the
   reader's and retrieval's shares of the server's time per answer.

Writes benchmarks/results/answer.json (or ``--out``).
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import (
    add_override_argument,
    evaluation,
    make_retriever,
    reader_config,
    results_name,
    retriever_config,
    template,
    write_json,
)
from isorag_pyg.cli.remote import served_answer
from isorag_pyg.qa import OpenAIChatGenerator, answer_questions
from isorag_pyg.qa.citations import without_markers
from isorag_pyg.qa.llama_server import LlamaServer
from isorag_pyg.qa.metrics import exact_match, token_f1
from isorag_pyg.qa.models import packaged_gemma
from isorag_pyg.qa.reader_spec import ReaderSpec

RETRIEVERS = ["dense", "ppr", "iso"]


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50 and p95 (nearest rank) of ``values``, in seconds."""
    if not values:
        return {"p50": None, "p95": None, "n": 0}
    ordered = sorted(values)
    return {"p50": statistics.median(ordered), "p95": ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)], "n": len(ordered)}


def dev_set(dataset: str, questions: int, overrides: list[str]) -> Any:
    """The first ``questions`` dev questions of ``dataset`` with their index (title-mention graph)."""
    return evaluation(f"dataset={dataset}", "graph=title_mention", "split=dev", f"max_questions={questions}", *overrides)[0]


def compare(dataset: str, questions: int, k: int, retrievers: list[str], harness: OpenAIChatGenerator, reader: Any,
            overrides: list[str]) -> dict[str, Any]:
    """Part 1 and 2 for one dev set: per retriever, harness and product side by side."""
    inputs = dev_set(dataset, questions, overrides)
    qs, index, prompt = inputs.dataset.questions, inputs.index, template("fewshot")
    out: dict[str, Any] = {"n_questions": len(qs)}
    for name in retrievers:
        ranked = make_retriever(inputs, retriever_config(name)).retrieve(inputs.queries, k).indices.tolist()
        passages = [[index.passages[i] for i in rows] for rows in ranked]
        start = time.perf_counter()
        metrics, rows = answer_questions(harness, prompt, qs, passages)
        harness_s = time.perf_counter() - start
        start = time.perf_counter()
        answers = index.answer([q.text for q in qs], k=k, retriever=name, reader=reader)
        product_s = time.perf_counter() - start
        scored = [without_markers(a["answer"]) for a in answers]
        cited = [{c["id"] for c in a["citations"]} for a in answers]
        retrieved = [[p["id"] for p in a["passages"]] for a in answers]
        out[name] = {
            "harness": {"em": metrics["em"], "f1": metrics["f1"], "seconds": harness_s},
            "product": {"em": sum(exact_match(s, q.answers) for s, q in zip(scored, qs)) / len(qs),
                        "f1": sum(token_f1(s, q.answers) for s, q in zip(scored, qs)) / len(qs), "seconds": product_s},
            "identical_answers": sum(r["answer"] == a["answer"] for r, a in zip(rows, answers)) / len(qs),
            "identical_passages": sum([p.id for p in ps] == ids for ps, ids in zip(passages, retrieved)) / len(qs),
            "recall_at_5": sum(len(set(ids[:5]) & set(q.gold_ids)) / max(1, len(q.gold_ids)) for ids, q in zip(retrieved, qs)) / len(qs),
            "citation_gold_hit": sum(bool(c & set(q.gold_ids)) for c, q in zip(cited, qs)) / len(qs),
            "citing_answers": sum(bool(c) for c in cited) / len(qs),
            "citations_inside_retrieved": (sum(len(c & set(ids)) for c, ids in zip(cited, retrieved)) / n) if (n := sum(map(len, cited))) else None,
            "answers": [a["answer"] for a in answers],
        }
        row = out[name]
        print(f"  {dataset:16s} {name:6s} harness EM {row['harness']['em']:.3f} F1 {row['harness']['f1']:.3f} | product EM {row['product']['em']:.3f} "
              f"F1 {row['product']['f1']:.3f} | identical {row['identical_answers']:.2f} | R@5 {row['recall_at_5']:.3f} "
              f"cite-gold {row['citation_gold_hit']:.3f} citing {row['citing_answers']:.2f}", flush=True)
    out["question_texts"] = [q.text for q in qs]
    return out


class ServeProcess:
    """``isorag serve`` of ``index_dir`` with the packaged reader, on a free port."""

    def __init__(self, index_dir: Path, log: Path, threads: int):
        self.index_dir, self.log = index_dir, log
        with log.open("w") as stderr:
            # 16 clients queue at the one llama.cpp server: give the last of them time to be answered
            self.process = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "serve", str(index_dir), "--port", "0", "--threads", str(threads),
                                             "--llm-timeout", "1800"], stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 600
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"isorag serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        self.url = found.group(1)

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.url}/answer", data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def streamed(server: ServeProcess, question: str, k: int) -> tuple[float, float]:
    """(first token, total) seconds of one streamed ``POST /answer``."""
    start, first = time.perf_counter(), None
    for kind, _ in served_answer(server.url, server.index_dir, question, k, "iso", stream=True):
        if kind == "token" and first is None:
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    return (first if first is not None else total), total


def asked(server: ServeProcess, question: str, k: int) -> tuple[float, float]:
    """(first byte on stdout, exit) seconds of ``isorag ask --server``."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "ask", str(server.index_dir), question, "-k", str(k), "--server", server.url],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    process.stdout.read(1)
    first = time.perf_counter() - start
    process.communicate(timeout=600)
    if process.returncode != 0:
        raise RuntimeError(f"isorag ask --server failed on {question!r}")
    return first, time.perf_counter() - start


def latency(server: ServeProcess, questions: list[str], k: int) -> dict[str, Any]:
    """Part 3: TTFT and total, p50/p95, through POST /answer (streamed) and isorag ask --server."""
    out = {}
    for name, measure in (("post_answer_stream", streamed), ("isorag_ask_server", asked)):
        pairs = [measure(server, q, k) for q in questions]
        out[name] = {"first_token_s": percentiles([p[0] for p in pairs]), "total_s": percentiles([p[1] for p in pairs])}
        print(f"  {name:20s} TTFT p50 {out[name]['first_token_s']['p50']:.2f} s p95 {out[name]['first_token_s']['p95']:.2f} s | total p50 "
              f"{out[name]['total_s']['p50']:.2f} s p95 {out[name]['total_s']['p95']:.2f} s", flush=True)
    return out


def throughput(server: ServeProcess, questions: list[str], k: int, clients: int) -> dict[str, Any]:
    """Part 4: ``clients`` threads answering ``questions`` (non-streamed) between them, repeated
    until there is one a client at least."""
    lock, todo, results = threading.Lock(), (questions * -(-clients // len(questions)))[:max(clients, len(questions))], []

    def client() -> None:
        while True:
            with lock:
                if not todo:
                    return
                question = todo.pop()
            start = time.perf_counter()
            answer = server.post({"question": question, "k": k})
            with lock:
                results.append((time.perf_counter() - start, answer["timings"]))

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - start
    total = sum(r[0] for r in results)
    row = {"clients": clients, "answers": len(results), "seconds": wall, "answers_per_s": len(results) / wall,
           "reader_share": sum(t["reader_s"] for _, t in results) / total, "retrieval_share": sum(t["retrieval_s"] for _, t in results) / total,
           "latency_s": percentiles([r[0] for r in results])}
    print(f"  {clients:3d} clients: {row['answers_per_s']:.3f} answers/s, reader {row['reader_share']:.1%} of the time, "
          f"retrieval {row['retrieval_share']:.2%}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--retrievers", nargs="+", default=RETRIEVERS, choices=RETRIEVERS)
    parser.add_argument("--questions", type=int, default=100, help="dev questions per dataset for parts 1 and 2 (0: skip them)")
    parser.add_argument("--latency-questions", type=int, default=100, help="questions for part 3 (0: skip parts 3 and 4)")
    parser.add_argument("--clients", nargs="+", type=int, default=[1, 4, 16], help="concurrent clients for part 4")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the served index (the reader gets every core)")
    parser.add_argument("--out", type=results_name, default="answer.json", help="file name under benchmarks/results/")
    add_override_argument(parser)
    args = parser.parse_args()
    if args.questions < 0 or args.latency_questions < 0 or min(args.clients) < 1 or args.threads < 1:
        parser.error("--questions and --latency-questions must be >= 0, --clients and --threads >= 1")
    logging.basicConfig(level=logging.WARNING)
    decoding = reader_config()
    k = int(decoding["top_k"])
    payload: dict[str, Any] = {"sizes": {"questions_per_dataset": args.questions, "latency_questions": args.latency_questions, "clients": args.clients,
                                         "datasets": args.datasets, "retrievers": args.retrievers, "k": k},
                               "reader": {"model": packaged_gemma().name, "template": "fewshot", "max_tokens": decoding["max_tokens"],
                                          "stop": decoding["stop"]}, "complete": False}
    if args.questions:
        payload["agreement"] = {}
        with LlamaServer(packaged_gemma(), alias="gemma-3-270m") as served, ReaderSpec().make() as reader:
            harness = OpenAIChatGenerator(served.base_url, served.model, concurrency=1, max_retries=2, timeout=600, temperature=0.0,
                                          max_tokens=int(decoding["max_tokens"]), stop=list(decoding["stop"]))
            for dataset in args.datasets:
                payload["agreement"][dataset] = compare(dataset, args.questions, k, args.retrievers, harness, reader, args.override)
                write_json(args.out, payload)
    if args.latency_questions:
        inputs = dev_set(args.datasets[0], args.latency_questions, args.override)
        questions = [q.text for q in inputs.dataset.questions]
        with tempfile.TemporaryDirectory(prefix="isorag-answer-bench-") as tmp:
            inputs.index.save(Path(tmp) / "index")
            server = ServeProcess(Path(tmp) / "index", Path(tmp) / "serve.log", args.threads)
            try:
                server.post({"question": "What is the capital of France?", "k": k})  # starts the reader: warm, not timed
                payload["latency"] = {"dataset": args.datasets[0], **latency(server, questions, k)}
                payload["throughput"] = [throughput(server, questions, k, c) for c in args.clients]
            finally:
                server.stop()
    payload["complete"] = True
    write_json(args.out, payload)


if __name__ == "__main__":
    main()
