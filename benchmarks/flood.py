"""Flood test of ``isorag serve``: real clients' latency with and without thousands of idle and
slow-loris sockets held open against the same server, in one run.

    python -m benchmarks.flood [--index DIR] [--corpus PATH|synthetic] [--idle 1100] [--slow 1000] [--clients 32]
        [--requests 2000] [--slow-interval 1.0]

* The index: ``--index DIR`` if it holds one, else ``isorag index`` over ``--corpus`` (default:
  the 2Wiki corpus of ../shared/datasets, title-mention graph; ``synthetic``: a generated one),
  saved to ``DIR`` (default: a temporary folder).
* ``isorag serve`` on 127.0.0.1 (a free port, its default limits: ``--read-timeout 10``,
  ``--max-connections 8192``, ``--max-connections-per-client 4096``; its query cache off, as
  the clients repeat questions); nothing else is contacted.
* Real clients: ``--clients`` closed-loop asyncio clients (aiohttp, one connection each) send
  single-question ``POST /retrieve`` requests (the first 100 characters of a passage, ``k`` = 5,
  ISO-RAG) until ``--requests`` are answered; only a 200 with ``k`` passages counts, anything
  else (another status, a reset, a timeout) is a failed request.
* The flood, from another process on the same address: ``--idle`` sockets that send nothing and
  ``--slow`` sockets that send a request's headers one byte every ``--slow-interval`` seconds and
  never finish them. Each socket the server closes is opened again 50 ms later, so the flood
  keeps its size for as long as it runs.
* Three phases, one server: without the flood, with it (held open from ``--settle`` seconds,
  past the first read timeouts and reconnections, before the clients start until they finish),
  without it again. Reports each phase's failed requests, p50 / p99 latency
  and requests/s, the ratio of the flood's p99 to the p99 of both phases without it (pooled),
  the flood's connects and the server's connection counters (``GET /health``); writes
  benchmarks/results/flood.json.

Targets: 0 failed real requests; p99 with the flood within 3x the p99 without it. Clients, flood
and server share the machine's cores: figures are for this machine as it was.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from benchmarks.common import DATA_DIR, REPO, timed_retrieve, write_json

#: The headers a slow-loris socket sends, a byte at a time, never reaching the blank line that ends them.
SLOW_HEADERS = b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Padding: " + b"a" * 100_000
RECONNECT_S = 0.05


async def hold(host: str, port: int, slow: bool, interval: float, stop: asyncio.Event, tally: Counter) -> None:
    """One flood socket, opened again whenever the server closes it, until ``stop``."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            tally["connect_errors"] += 1
            await asyncio.sleep(RECONNECT_S)
            continue
        tally["connects"] += 1
        try:
            await held(reader, writer, slow, interval, stop, tally)
        except OSError:
            tally["closed_by_server"] += 1
        finally:
            writer.close()
        await asyncio.sleep(RECONNECT_S)


async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slow: bool, interval: float, stop: asyncio.Event,
               tally: Counter) -> None:
    """Keep one connection, idle or sending a byte every ``interval``, until the server closes it or ``stop``."""
    sent = 0
    while not stop.is_set():
        try:
            data = await asyncio.wait_for(reader.read(1024), timeout=interval if slow else 0.5)
        except asyncio.TimeoutError:
            if slow:
                writer.write(SLOW_HEADERS[sent:sent + 1])
                sent += 1
                await writer.drain()
            continue
        if not data:
            tally["closed_by_server"] += 1
            return
        tally["answered_by_server"] += 1  # a 503 refusal


def flood(host: str, port: int, idle: int, slow: int, interval: float, ready: Any, stop: Any, results: Any) -> None:
    """The flood process: holds the sockets until ``stop`` is set, then sends its tally."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    async def run() -> Counter:
        tally: Counter = Counter()
        done = asyncio.Event()
        tasks = [asyncio.ensure_future(hold(host, port, i >= idle, interval, done, tally)) for i in range(idle + slow)]
        while tally["connects"] < idle + slow:
            await asyncio.sleep(0.05)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.1)
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        return tally

    results.put(dict(asyncio.run(run())))


async def drive(url: str, questions: list[str], clients: int, requests: int, k: int) -> dict[str, Any]:
    """``clients`` closed-loop clients until ``requests`` are sent: latencies (s) and failures."""
    latencies: list[float] = []
    failures: Counter[str] = Counter()
    sent = 0
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=clients), timeout=aiohttp.ClientTimeout(total=120)) as session:
        start = time.perf_counter()

        async def client() -> None:
            nonlocal sent
            while sent < requests:
                body = {"questions": [questions[sent % len(questions)]], "k": k}
                sent += 1
                seconds, failure = await timed_retrieve(session, body, k)
                if failure is None:
                    latencies.append(seconds)
                else:
                    failures[failure] += 1

        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - start
    return {"latencies": latencies, "failures": dict(failures), "wall": wall}


def figures(run: dict[str, Any]) -> dict[str, Any]:
    ms = np.asarray(run["latencies"]) * 1000
    return {"answered": len(ms), "failed": sum(run["failures"].values()), "failures": run["failures"],
            "requests_per_s": round(len(ms) / run["wall"], 1), "p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p99_ms": round(float(np.percentile(ms, 99)), 1)}


def prepare_index(args: argparse.Namespace, work: Path) -> tuple[Path, list[str]]:
    """The index to serve (built with ``isorag index`` unless given) and the clients' questions."""
    index_dir = args.index or work / "index"
    if not (index_dir / "manifest.json").is_file():
        corpus = args.corpus
        if corpus == "synthetic":
            from isorag_pyg.datasets import generate_synthetic_dataset

            corpus = work / "corpus.jsonl"
            records = generate_synthetic_dataset(num_entities=300, num_hubs=4, hub_size=20, num_questions=10).corpus
            corpus.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in records))
        built = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", "index", str(corpus), str(index_dir), "--graph", "title_mention",
                                "--quiet"], capture_output=True, text=True, cwd=REPO, check=False)
        if built.returncode != 0:
            raise SystemExit(built.stderr[-2000:])
    with open(index_dir / "passages.jsonl", encoding="utf-8") as handle:
        questions = [json.loads(line)["text"][:100] for line, _ in zip(handle, range(1000))]
    return index_dir, questions


def start_server(index_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    with open(log, "w") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "serve", str(index_dir), "--port", "0", "--query-cache", "0"],
                                  stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if found := re.search(r"listening on (http://\S+)", log.read_text()):
            return server, found.group(1)
        if server.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not start in 600 s")


async def health(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession(url) as session, session.get("/health") as response:
        return await response.json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=None, help="an index to serve; built there when missing")
    parser.add_argument("--corpus", default=f"{DATA_DIR}/2wikimultihopqa/corpus.json", help="a corpus file, or 'synthetic'")
    parser.add_argument("--idle", type=int, default=1100, help="sockets that send nothing (default: 1100)")
    parser.add_argument("--slow", type=int, default=1000, help="sockets that send a byte every --slow-interval (default: 1000)")
    parser.add_argument("--slow-interval", type=float, default=1.0, help="seconds between a slow socket's bytes (default: 1)")
    parser.add_argument("--clients", type=int, default=32, help="real clients (default: 32)")
    parser.add_argument("--requests", type=int, default=2000, help="real requests per phase (default: 2000)")
    parser.add_argument("--settle", type=float, default=12.0,
                        help="seconds the flood is held before the clients start: past the server's read timeout (default: 12)")
    parser.add_argument("--warmup", type=int, default=200, help="unrecorded real requests first (default: 200)")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--out", default="flood.json", help="file name under benchmarks/results/ (default: flood.json)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="isorag-flood-") as tmp:
        work = Path(tmp)
        index_dir, questions = prepare_index(args, work)
        server, url = start_server(index_dir, work / "serve.log")
        host, port = url.removeprefix("http://").rsplit(":", 1)
        try:
            asyncio.run(drive(url, questions[::-1], args.clients, args.warmup, args.k))
            phases: dict[str, dict[str, Any]] = {}
            phases["without_before"] = asyncio.run(drive(url, questions, args.clients, args.requests, args.k))
            print("without the flood:", figures(phases["without_before"]), flush=True)
            spawn = multiprocessing.get_context("spawn")
            ready, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
            flooder = spawn.Process(target=flood, args=(host, int(port), args.idle, args.slow, args.slow_interval, ready, stop, results))
            flooder.start()
            if not ready.wait(300):
                raise SystemExit("the flood did not open its sockets in 300 s")
            time.sleep(args.settle)
            held = asyncio.run(health(url))["connections"]
            phases["with_flood"] = asyncio.run(drive(url, questions, args.clients, args.requests, args.k))
            during = asyncio.run(health(url))["connections"]
            stop.set()
            tally = results.get(timeout=120)
            flooder.join(30)
            print("with the flood:", figures(phases["with_flood"]), flush=True)
            time.sleep(2)
            phases["without_after"] = asyncio.run(drive(url, questions, args.clients, args.requests, args.k))
            print("without the flood, again:", figures(phases["without_after"]), flush=True)
            alive = server.poll() is None
        finally:
            server.terminate()
            server.wait(30)
    without = {"latencies": phases["without_before"]["latencies"] + phases["without_after"]["latencies"],
               "failures": dict(Counter(phases["without_before"]["failures"]) + Counter(phases["without_after"]["failures"])),
               "wall": phases["without_before"]["wall"] + phases["without_after"]["wall"]}
    result = {name: figures(run) for name, run in phases.items()}
    result["without_pooled"] = figures(without)
    ratio = result["with_flood"]["p99_ms"] / result["without_pooled"]["p99_ms"]
    result.update(p99_ratio=round(ratio, 2), flood={"idle": args.idle, "slow": args.slow, "slow_interval_s": args.slow_interval,
                                                    "settle_s": args.settle, **tally},
                  server_connections={"flood_held": held, "after_flood_phase": during}, server_alive=alive,
                  clients=args.clients, requests=args.requests, index=str(index_dir), load_1min=round(os.getloadavg()[0], 2),
                  cores=os.cpu_count(),
                  targets={"no_failed_request": result["with_flood"]["failed"] == 0 and result["without_pooled"]["failed"] == 0,
                           "p99_ratio<=3": ratio <= 3})
    print(f"p99 with the flood / without: {ratio:.2f}; flood {tally}; server connections while held {held}, after {during}")
    print("targets: " + ", ".join(f"{key}: {'met' if ok else 'NOT met'}" for key, ok in result["targets"].items()))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
