"""The reader's speed under different llama-cpp-python server settings, side by side on the same
prompts: llama.cpp's prompt and generation tokens/s, wall seconds per question, and whether the
greedy answers equal those of the first configuration (today's settings before tuning).

    python -m benchmarks.reader_speed                                    # 20 training questions of HotpotQA
    python -m benchmarks.reader_speed --configs legacy default threads=1 n_batch=1024,n_ubatch=1024

A configuration is ``legacy`` (:data:`~isorag_pyg.qa.llama_server.LEGACY_SETTINGS`: one thread, logits
of every prompt token, llama-cpp-python's batch sizes), ``default`` (:class:`ReaderSettings`()),
or ``KEY=VALUE[,KEY=VALUE...]`` over the defaults (``threads``, ``logits_all``, ``n_batch``,
``n_ubatch``, ``prompt_cache``, and ``servers``: that many servers sharing the questions, one
request at a time each). Each configuration starts its own servers, answers a warm-up prompt
(the few-shot examples and a question without passages), then every prompt in the same order; the configurations run one after another, never at once.

The prompts are the few-shot completion prompts of ``qa.py`` (``conf/qa/template/fewshot.yaml``)
for the first ``--questions`` training questions (never dev), each with its gold passages then
the passages after them in the corpus, up to five (the length of a top-5 prompt, no retrieval
needed). Writes benchmarks/results/reader_speed.json (or ``--out``).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import time
from contextlib import ExitStack
from typing import Any

from benchmarks.common import Spread, results_name, setup, template, throughput, write_json
from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.qa import OpenAIChatGenerator
from isorag_pyg.qa.llama_server import LEGACY_SETTINGS, LlamaServer, ReaderSettings
from isorag_pyg.qa.models import packaged_gemma

PASSAGES = 5


def configuration(spec: str) -> tuple[ReaderSettings, int]:
    """``legacy``, ``default`` or ``KEY=VALUE,...``: the server settings and how many servers."""
    if spec == "legacy":
        return LEGACY_SETTINGS, 1
    fields = {f.name: f.type for f in dataclasses.fields(ReaderSettings)}
    values: dict[str, Any] = {}
    servers = 1
    for item in [] if spec == "default" else spec.split(","):
        key, sep, value = item.partition("=")
        if not sep or (key not in fields and key != "servers"):
            raise argparse.ArgumentTypeError(f"expected legacy, default or KEY=VALUE,... with keys {sorted([*fields, 'servers'])}, got {spec!r}")
        if fields.get(key) == "bool":
            if value not in ("True", "False"):
                raise argparse.ArgumentTypeError(f"{key} is True or False, got {value!r}")
            values[key] = value == "True"
        elif not value.isdigit():
            raise argparse.ArgumentTypeError(f"{key} is a whole number, got {value!r}")
        elif key == "servers":
            servers = int(value)
        else:
            values[key] = int(value)
    if servers < 1:
        raise argparse.ArgumentTypeError(f"servers must be >= 1, got {servers}")
    try:
        return ReaderSettings(**values), servers
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def prompt_passages(questions: list[Question], corpus: list[Passage]) -> list[list[Passage]]:
    """Each question's gold passages, then the passages after the first of them in the corpus, up to five."""
    row = {p.id: i for i, p in enumerate(corpus)}
    out = []
    for q in questions:
        gold = [row[g] for g in q.gold_ids if g in row]
        start = min(gold) if gold else 0
        rest = [i for i in range(start, min(start + 2 * PASSAGES, len(corpus))) if i not in gold]
        out.append([corpus[i] for i in (gold + rest)[:PASSAGES]])
    return out


def run_configuration(spec: str, warm_up: str, requests: list[str], max_tokens: int, stop: list[str]) -> dict[str, Any]:
    """Start the configuration's servers, warm them up (model load, the few-shot prefix), answer
    every request; its speed and answers."""
    settings, n_servers = configuration(spec)
    model = packaged_gemma()
    with ExitStack() as stack:
        servers = [stack.enter_context(LlamaServer(model, alias="gemma-3-270m", settings=settings)) for _ in range(n_servers)]
        generator = Spread([OpenAIChatGenerator(s.base_url, s.model, concurrency=1, max_retries=2, timeout=600, temperature=0.0,
                                                max_tokens=max_tokens, stop=stop) for s in servers])
        generator.generate([warm_up] * n_servers)  # not timed
        done = [len(s.timings()) for s in servers]
        start = time.perf_counter()
        records = generator.generate(requests)
        seconds = time.perf_counter() - start
        timings = [t for s, n in zip(servers, done) for t in s.timings()[n:]]
    # per server: with several servers the prompts are answered concurrently, so the wall seconds tell the total
    return {"config": spec, "settings": dataclasses.asdict(settings), "servers": n_servers, **throughput(timings),
            "evaluated_prompt_tokens": sum(t.prompt_tokens for t in timings), "prompt_tokens": sum(r["prompt_tokens"] for r in records),
            "generated_tokens": sum(t.generated_tokens for t in timings), "seconds_per_question": seconds / len(requests),
            "load_average_1min": os.getloadavg()[0],  # other work on the machine slows every configuration
            "answers": [r["answer"] for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--questions", type=int, default=20, help="the first N training questions")
    parser.add_argument("--configs", nargs="+", type=str, default=["legacy", "default"],
                        help="legacy | default | KEY=VALUE,... (the first is the baseline the others are compared with)")
    parser.add_argument("--out", type=results_name, default="reader_speed.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    if args.questions < 1:
        parser.error("--questions must be >= 1")
    for spec in args.configs:
        try:
            configuration(spec)
        except argparse.ArgumentTypeError as err:
            parser.error(str(err))
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still stops its servers
    chosen = setup(f"dataset={args.dataset}", "split=train", "qa=gguf")
    dataset = chosen.dataset
    prompt = template("fewshot")
    shots = {e["question"] for e in prompt.examples}
    questions = [q for q in dataset.questions if q.text not in shots][: args.questions]
    requests = [prompt.request(q.text, p) for q, p in zip(questions, prompt_passages(questions, dataset.corpus))]
    stop, max_tokens = list(chosen.qa["stop"]), int(chosen.qa["max_tokens"])
    runs = []
    print(f"{args.dataset} training questions: {len(requests)} prompts")
    print(f"  {'config':42s} {'prompt t/s':>10s} {'gen t/s':>8s} {'s/q':>6s} {'x prompt':>8s} {'same answers':>12s}")
    for spec in args.configs:
        run = run_configuration(spec, prompt.request("What is the capital of France?", []), requests, max_tokens, stop)
        base = runs[0] if runs else run
        run["prompt_speedup"] = run["prompt_tokens_per_s"] / base["prompt_tokens_per_s"]
        run["same_answers"] = sum(a == b for a, b in zip(run["answers"], base["answers"])) / len(requests)
        runs.append(run)
        print(f"  {spec:42s} {run['prompt_tokens_per_s']:10.1f} {run['generation_tokens_per_s'] or 0:8.1f} {run['seconds_per_question']:6.2f} "
              f"{run['prompt_speedup']:8.2f} {run['same_answers']:12.2f}", flush=True)
        write_json(args.out, {"dataset": args.dataset, "split": "train", "questions": [q.id for q in questions],
                              "reader": {"model": packaged_gemma().name, "decoding": "greedy", "stop": stop, "max_tokens": max_tokens},
                              "protocol": "same prompts, same order, one configuration at a time; tokens/s from llama.cpp's own timings",
                              "complete": len(runs) == len(args.configs), "runs": runs})


if __name__ == "__main__":
    main()
