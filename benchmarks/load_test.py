"""Load test of ``isorag serve`` on the 2Wiki index, two servers side by side in one run:
micro-batching on against off (``--compare batching``), or a torch-encoder index against one on
a faster encoder backend (``--compare backends``, both batching).

    python -m benchmarks.load_test [--compare batching|backends] [--index DIR] [--clients 1 16 128] [--requests 1024]
        [--level-seconds 120] [--server-threads N] [--encoder-backend torch|onnx|onnx-int8|openvino|openvino-bf16] [--query-cache N]
        [--check-questions 200]

* The index: ``--index DIR`` if it holds one, else ``ISORAGIndex.build`` over the 2Wiki corpus
  with the project's defaults and the encoder on ``--encoder-backend`` (default: torch), saved to
  ``DIR`` (default: a temporary folder, removed at the end). With ``--compare backends``, ``DIR``
  holds two such indexes, ``DIR/torch`` and ``DIR/<--encoder-backend>`` (default: onnx-int8).
  The servers embed questions on their index's backend.
* The servers' query-embedding cache is off (``--query-cache 0``) unless asked for: the clients
  cycle through 1,000 questions, so a cache would measure repeats, not encoding.
* Two servers on 127.0.0.1 (free ports), started side by side: micro-batching on (the
  defaults: ``--batch-window-ms 2 --max-batch 128``) and off (``--no-batching``); or, comparing
  backends, both batching, one per index.
* For each level of concurrent clients, each server is driven by that many asyncio clients
  (aiohttp, one connection each, closed loop) sending single-question ``POST /retrieve``
  requests (2Wiki dev questions, ``k`` = 5, ISO-RAG), in the order A, B, B, A (on, off, off, on), each run
  until ``--requests`` / 2 requests have been sent or ``--level-seconds`` / 2 have passed (so
  that load from other processes, drifting over time, weighs on both modes alike). Only 200
  answers with ``k`` passages count; anything else is counted as an error.
* The served answers: the first ``--check-questions`` questions, asked one a request by 16
  clients at once, against ``ISORAGIndex.retrieve`` in this process on the same index: the share
  of identical top-k lists and both Recall@k.
* Prints requests/s and p50 / p99 latency per level (as the clients measure it, and inside the
  servers from their ``GET /health`` latency histogram), the two servers side by side with their ratio,
  the batches the servers formed, where their worker's time went per question (encoder, ISO-RAG
  retrieval; from ``GET /health``), and the machine's load average; writes
  benchmarks/results/load_test.json (``--compare backends``: load_test_backends.json).

Targets at 128 clients: micro-batching on serves ≥ 5× the requests/s of off, with p99 ≤ 100 ms;
the faster backend ≥ 3× torch's requests/s (batching on both) with p99 ≤ 500 ms; served answers
equal to ``ISORAGIndex.retrieve``.
Clients and servers share the machine's cores: the figures are for this machine as it was. The
clients' process keeps what it loaded out of its garbage collector's full collections, as the
servers do, so that its own collection pauses are not counted as the servers' latency.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from benchmarks.common import REPO, results_name, setup, timed_retrieve, write_json
from isorag_pyg.cli.parser import ENCODER_BACKENDS
from isorag_pyg.server.latency import percentile_ms
from isorag_pyg.server.memory import freeze_long_lived

#: Per comparison, its two servers in the order A, B: each level runs A, B, B, A and reports A / B.
COMPARISONS = ("batching", "backends")


def server_plan(compare: str, root: Path, backend: str) -> dict[str, tuple[Path, list[str], str]]:
    """Server name -> (its index folder, its extra ``isorag serve`` flags, the index's encoder backend)."""
    if compare == "batching":
        return {"on": (root, [], backend), "off": (root, ["--no-batching"], backend)}
    return {backend: (root / backend, [], backend), "torch": (root / "torch", [], "torch")}


def load_or_build_index(directory: Path, questions_only: bool, backend: str = "torch") -> tuple[list[str], list[set[str]], dict[str, Any]]:
    """The 2Wiki dev questions, their gold passage ids, and (building it first unless
    ``questions_only``) the index's summary."""
    from isorag_pyg.index import ISORAGIndex

    chosen = setup("dataset=2wikimultihopqa", "graph=title_mention", "trainer.enable_progress_bar=false", "+trainer.enable_model_summary=false",
                   backend=backend)
    eval_ds = chosen.dataset
    if not questions_only:
        start = time.perf_counter()
        index = ISORAGIndex.build(eval_ds.corpus, **chosen.options, progress=False)
        index.save(directory)
        print(f"built the 2Wiki index in {time.perf_counter() - start:.0f} s: {index!r}", flush=True)
    info = ISORAGIndex.load(directory).info()
    return ([q.text for q in eval_ds.questions], [set(q.gold_ids) for q in eval_ds.questions],
            {"dir": str(directory), "counts": info["counts"], "graph": info["graph"]["builders"], "f_theta": info["f_theta"] is not None,
             "phi": info["phi"], "encoder_backend": info["encoder"].get("backend", "torch")})


class ServerProcess:
    """``isorag serve`` on a free 127.0.0.1 port; :meth:`ready` waits for its address."""

    def __init__(self, index_dir: Path, log: Path, args: list[str]):
        self.log = log
        with open(log, "w") as stderr:
            self.process = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "serve", str(index_dir), "--port", "0", *args],
                                            stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO)

    def ready(self, timeout: float = 600) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := re.search(r"listening on (http://\S+)", self.log.read_text()):
                return found.group(1)
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}: {self.log.read_text()[-1000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"the server did not start within {timeout} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def servers(plan: dict[str, tuple[Path, list[str], str]], work: Path, window_ms: float, max_batch: int, threads: int | None,
            query_cache: int) -> Iterator[dict[str, str]]:
    """Both servers, started side by side; name -> URL."""
    common = ["--query-cache", str(query_cache)] + (["--threads", str(threads)] if threads else [])
    batching = ["--batch-window-ms", str(window_ms), "--max-batch", str(max_batch)]  # for the servers that batch
    running = {mode: ServerProcess(index_dir, work / f"serve-{mode}.log", common + ([] if "--no-batching" in args else batching) + args)
               for mode, (index_dir, args, _) in plan.items()}
    try:
        yield {mode: server.ready() for mode, server in running.items()}
    finally:
        for server in running.values():
            server.stop()


async def drive(url: str, questions: list[str], clients: int, requests: int, seconds: float, k: int) -> dict[str, Any]:
    """``clients`` closed-loop clients sending single-question requests until ``requests`` are
    sent or ``seconds`` have passed: the good answers' latencies (s), errors by kind, wall time,
    requests sent, and the server's counters over the run."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    sent = 0
    timeout = aiohttp.ClientTimeout(total=seconds + 60)
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=clients), timeout=timeout) as session:
        async with session.get("/health") as response:
            health = await response.json()
            before, latency_before = health["stats"], health["latency"]["counts"]
        start = time.perf_counter()
        deadline = start + seconds

        async def client() -> None:
            nonlocal sent
            while sent < requests and time.perf_counter() < deadline:
                body = {"questions": [questions[sent % len(questions)]], "k": k, "retriever": "iso"}
                sent += 1
                seconds, failure = await timed_retrieve(session, body, k)
                if failure is None:
                    latencies.append(seconds)
                else:
                    errors[failure] += 1

        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - start
        async with session.get("/health") as response:
            health = await response.json()
            after, latency_after = health["stats"], health["latency"]["counts"]
    return {"latencies": latencies, "errors": errors, "wall": wall, "sent": sent, "server": {key: after[key] - before[key] for key in before},
            "server_latency_counts": [a - b for a, b in zip(latency_after, latency_before)]}


async def served_top_k(url: str, questions: list[str], k: int, clients: int = 16) -> list[list[str]]:
    """The passage ids the server answers for each question, asked one a request by ``clients``
    clients at once (so that the server batches them with each other)."""
    answers: list[list[str]] = [[] for _ in questions]
    pending = iter(range(len(questions)))
    async with aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def client() -> None:
            for i in pending:
                async with session.post("/retrieve", json={"questions": [questions[i]], "k": k, "retriever": "iso"}) as response:
                    response.raise_for_status()
                    answers[i] = [hit["id"] for hit in (await response.json())[0]["results"]]

        await asyncio.gather(*(client() for _ in range(clients)))
    return answers


def served_check(url: str, index_dir: Path, questions: list[str], gold: list[set[str]], k: int) -> dict[str, Any]:
    """The server's answers against ``ISORAGIndex.retrieve`` on the same index, in this process."""
    from isorag_pyg.index import ISORAGIndex

    served = asyncio.run(served_top_k(url, questions, k))
    local = [[hit.id for hit in hits] for hits in ISORAGIndex.load(index_dir).retrieve(questions, k)]

    def recall(found: list[list[str]]) -> float:
        return round(100 * float(np.mean([len(set(ids) & g) / len(g) for ids, g in zip(found, gold)])), 2)

    return {"questions": len(questions), "identical_top_k_share": round(float(np.mean([a == b for a, b in zip(served, local)])), 4),
            f"served_recall@{k}": recall(served), f"retrieve_recall@{k}": recall(local)}


def summary(runs: list[dict[str, Any]], requests: int) -> dict[str, Any]:
    """One mode's figures over its runs at one level."""
    ms = np.asarray([x for run in runs for x in run["latencies"]]) * 1000
    wall = sum(run["wall"] for run in runs)
    server = {key: sum(run["server"][key] for run in runs) for key in runs[0]["server"] if key != "largest_batch"}
    busy = server["encode_seconds"] + server["retrieval_seconds"]
    inside = [sum(counts) for counts in zip(*(run["server_latency_counts"] for run in runs))]  # the server's own histogram
    return {
        "requests": len(ms), "errors": dict(sum((run["errors"] for run in runs), Counter())), "wall_s": round(wall, 3),
        "stopped_by_time": sum(run["sent"] for run in runs) < requests, "requests_per_s": round(len(ms) / wall, 2),
        "p50_ms": round(float(np.percentile(ms, 50)), 2) if len(ms) else None,
        "p99_ms": round(float(np.percentile(ms, 99)), 2) if len(ms) else None,
        "mean_ms": round(float(ms.mean()), 2) if len(ms) else None,
        # inside the server (handler to answer ready), an upper bound within one bucket (x1.25)
        "server_p50_ms": percentile_ms(inside, 0.5), "server_p99_ms": percentile_ms(inside, 0.99),
        "batches": server["batches"], "questions_per_batch": round(server["questions"] / max(server["batches"], 1), 2),
        "retrieval_calls": server["retrieval_calls"],
        # where the worker's time went, per question: the encoder, and ISO-RAG's batched retrieval
        "encode_ms_per_question": round(server["encode_seconds"] * 1000 / max(server["questions"], 1), 3),
        "retrieval_ms_per_question": round(server["retrieval_seconds"] * 1000 / max(server["questions"], 1), 3),
        "worker_busy_fraction": round(busy / wall, 3),
    }


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def row(level: dict[str, Any], names: tuple[str, str]) -> str:
    def figures(run: dict[str, Any]) -> str:
        return (f"{run['requests_per_s']:7.1f} req/s p50 {run['p50_ms']:8.1f} ms p99 {run['p99_ms']:8.1f} ms "
                f"(in the server <= {_ms(run['server_p50_ms'])} / {_ms(run['server_p99_ms'])}) "
                f"({run['questions_per_batch']:5.1f} q/batch, encode {run['encode_ms_per_question']:5.1f} + "
                f"ISO {run['retrieval_ms_per_question']:5.2f} ms/q)")

    errors = " | errors " + ", ".join(f"{n} {level[n]['errors']}" for n in names) if any(level[n]["errors"] for n in names) else ""
    return (f"{level['clients']:>4} clients | " + " | ".join(f"{n}: {figures(level[n])}" for n in names)
            + f" | {names[0]}/{names[1]} {level['ratio_requests_per_s']:.2f}x | load {level['load_1min']:.2f}{errors}")


def targets(compare: str, names: tuple[str, str], top: dict[str, Any], checks: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """The targets of the comparison at the highest level, and served answers equal to ``retrieve``."""
    ratio, p99 = (5, 100) if compare == "batching" else (3, 500)
    clients = top["clients"]
    out = {f"ratio_at_{clients}_clients>={ratio}": top["ratio_requests_per_s"] >= ratio,
           f"p99_{names[0]}_at_{clients}_clients<={p99}ms": top[names[0]]["p99_ms"] is not None and top[names[0]]["p99_ms"] <= p99}
    out.update({f"served_equals_retrieve_{name}": check["identical_top_k_share"] == 1.0 for name, check in checks.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", choices=COMPARISONS, default="batching",
                        help="batching: one index, micro-batching on against off; backends: a torch index against an "
                             "--encoder-backend one, both batching (default: batching)")
    parser.add_argument("--index", type=Path, default=None,
                        help="an index to serve (with --compare backends: a folder of one index per backend); built there when missing")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 128], help="concurrency levels (default: 1 16 128)")
    parser.add_argument("--requests", type=int, default=1024, help="requests per level and mode (default: 1024)")
    parser.add_argument("--level-seconds", type=float, default=120, help="wall-time cap per level and mode (default: 120)")
    parser.add_argument("--warmup", type=int, default=64, help="unrecorded requests per server first (default: 64)")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--batch-window-ms", type=float, default=2.0)
    parser.add_argument("--max-batch", type=int, default=128)
    parser.add_argument("--server-threads", type=int, default=None, help="the servers' --threads (default: theirs, one per core)")
    parser.add_argument("--encoder-backend", choices=ENCODER_BACKENDS, default=None,
                        help="the encoder backend of an index built here (default: torch; onnx-int8 with --compare backends)")
    parser.add_argument("--query-cache", type=int, default=0, help="the servers' --query-cache (default: 0, off)")
    parser.add_argument("--check-questions", type=int, default=200, help="questions whose served answers are checked (default: 200)")
    parser.add_argument("--out", type=results_name, default=None, help="file name under benchmarks/results/ (default: load_test.json, load_test_backends.json)")
    args = parser.parse_args()
    args.encoder_backend = args.encoder_backend or ("onnx-int8" if args.compare == "backends" else "torch")
    args.out = args.out or ("load_test.json" if args.compare == "batching" else "load_test_backends.json")
    if args.compare == "backends" and args.encoder_backend == "torch":
        parser.error("--compare backends compares torch with another --encoder-backend")
    if min(args.clients) < 1 or args.requests < 2 or args.level_seconds <= 0 or args.check_questions < 1:
        parser.error("--clients, --level-seconds and --check-questions must be positive, --requests at least 2")

    names = tuple(server_plan(args.compare, Path("."), args.encoder_backend))
    with tempfile.TemporaryDirectory(prefix="isorag-load-") as tmp:
        work = Path(tmp)
        plan = server_plan(args.compare, args.index or work / "index", args.encoder_backend)
        indexes = {}
        for name, (index_dir, _, backend) in plan.items():
            questions, gold, indexes[name] = load_or_build_index(index_dir, (index_dir / "manifest.json").is_file(), backend)
        load_before = os.getloadavg()
        print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} ({os.cpu_count()} cores)", flush=True)
        levels = []
        freeze_long_lived()  # this process's own full collections (it imported torch) would otherwise count as latency
        with servers(plan, work, args.batch_window_ms, args.max_batch, args.server_threads, args.query_cache) as urls:
            for url in urls.values():
                asyncio.run(drive(url, questions[::-1], min(16, args.warmup), args.warmup, args.level_seconds, args.k))
            for offset, clients in enumerate(args.clients):
                level: dict[str, Any] = {"clients": clients, "load_1min": round(os.getloadavg()[0], 2)}
                shift = offset * args.requests % len(questions)
                shifted = questions[shift:] + questions[:shift]
                # A, B, B, A, each with half the requests and time: drifting load from other
                # processes weighs on both servers alike
                runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
                for name in (*names, *names[::-1]):
                    runs[name].append(asyncio.run(drive(urls[name], shifted, clients, args.requests // 2, args.level_seconds / 2, args.k)))
                for name, parts in runs.items():
                    level[name] = summary(parts, args.requests // 2 * 2)
                level["ratio_requests_per_s"] = round(level[names[0]]["requests_per_s"] / max(level[names[1]]["requests_per_s"], 1e-9), 2)
                levels.append(level)
                print(row(level, names), flush=True)
            checked = slice(0, args.check_questions)
            checks = {name: served_check(urls[name], plan[name][0], questions[checked], gold[checked], args.k) for name in names}
            for name, check in checks.items():
                print(f"{name}: served answers identical to ISORAGIndex.retrieve for {check['identical_top_k_share']:.1%} of "
                      f"{check['questions']} questions; Recall@{args.k} served {check[f'served_recall@{args.k}']}, "
                      f"retrieve {check[f'retrieve_recall@{args.k}']}", flush=True)
        load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    met = targets(args.compare, names, max(levels, key=lambda level: level["clients"]), checks)
    print("targets: " + ", ".join(f"{key}: {'met' if ok else 'NOT met'}" for key, ok in met.items()))
    write_json(args.out, {
        "compare": args.compare, "servers": list(names), "indexes": indexes, "k": args.k, "retriever": "iso",
        "requests_per_level": args.requests, "level_seconds": args.level_seconds,
        "batching": {"batch_window_ms": args.batch_window_ms, "max_batch": args.max_batch}, "server_threads": args.server_threads,
        "query_cache": args.query_cache, "order": f"per level: {names[0]}, {names[1]}, {names[1]}, {names[0]}, each with half the requests and half the time cap",
        "load_average_before": load_before, "load_average_after": load_after, "levels": levels, "served_check": checks, "targets": met,
    })

if __name__ == "__main__":
    main()
