"""Soak test of ``isorag serve`` following an index that another process keeps updating.

    python -m benchmarks.soak [--corpus PATH|synthetic] [--duration 600] [--clients 64] [--add-every 30] [--add-fraction 0.01]

* The corpus (default: the 2Wiki corpus of ../shared/datasets; ``synthetic``: a generated one)
  is split: the index is built over the first part (``isorag index``, φ p = 0, title-mention
  graph) and the rest is held back, 20 adds' worth.
* ``isorag serve`` on 127.0.0.1 (a free port; nothing else is contacted) serves it while
  ``--clients`` closed-loop clients send single-question ``POST /retrieve`` requests: half a
  passage's own text with ``dense`` (that passage must come back: nothing lost; passages longer
  than the server's question limit are not asked), half a dataset
  question with ISO-RAG.
* Every ``--add-every`` seconds another process (``isorag add``) adds the next
  ``--add-fraction`` of the corpus, then the server is told to ``POST /reload``.
* Each answer names the index version that produced it (``X-Index-Version``): every passage it
  returns must belong to that version with exactly its text, else it counts as wrong; a
  passage asked for by its own text and missing from a version that holds it counts as lost.
* Reports, per ``--window`` seconds: requests, failures (anything but a 200), wrong and lost
  answers, p50 / p99 latency, and the server's RSS; RSS growth after the warm-up (the first
  ``--warm-up`` seconds): the median of the last minute against that of the first minute after
  it (RSS swings by hundreds of MiB with each batch); writes benchmarks/results/soak.json and the
  plot docs/soak.png.

Targets: 0 failed requests, 0 wrong or lost passages, RSS growth under 5 % after warm-up. The
clients, the adder and the server share the machine: latencies are for this machine as it was.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from benchmarks.common import DATA_DIR, REPO, write_json
from isorag_pyg.server.settings import ServerSettings

MAX_QUESTION_CHARS = ServerSettings().max_question_chars


@dataclass
class Truth:
    """Which passages each index version holds, and every passage's (title, text)."""

    passages: dict[str, tuple[str, str]]
    versions: dict[int, frozenset[str]] = field(default_factory=dict)
    ids: dict[int, list[str]] = field(default_factory=dict)  # the same, as lists to draw from
    latest: int = 0

    def add_version(self, version: int, ids: frozenset[str]) -> None:
        self.versions[version] = ids
        self.ids[version] = sorted(i for i in ids if len(self.query(i)) <= MAX_QUESTION_CHARS)  # askable within the server's limit

    def query(self, pid: str) -> str:
        """A passage's own content, as the encoder embeds it."""
        title, text = self.passages[pid]
        return f"{title}\n{text}" if title else text


@dataclass
class Tally:
    """What the clients saw, per time window."""

    window: float
    start: float = field(default_factory=time.monotonic)
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        slot = int((time.monotonic() - self.start) // self.window)
        return self.rows.setdefault(slot, {"requests": 0, "failures": 0, "wrong": 0, "lost": 0, "latencies": [], "versions": set()})

    def note(self, kind: str, example: str) -> None:
        self.row()[kind] += 1
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {example}")


def read_passages(corpus: str, limit: int | None) -> list[dict[str, str]]:
    """``{id, title, text}`` records of the corpus, with stable ids."""
    if corpus == "synthetic":
        from isorag_pyg.datasets import generate_synthetic_dataset

        found = generate_synthetic_dataset(num_entities=limit or 300, num_hubs=4, hub_size=20, num_questions=10).corpus
        return [{"id": p.id, "title": p.title, "text": p.text} for p in found]
    from isorag_pyg.datasets.corpus_files import load_corpus

    found, _ = load_corpus(corpus)
    return [{"id": f"c{i}", "title": p.title, "text": p.text} for i, p in enumerate(found[:limit])]


def questions_for(corpus: str) -> list[str]:
    if corpus == "synthetic":
        from isorag_pyg.datasets import generate_synthetic_dataset

        return [q.text for q in generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=40).questions]
    dev = Path(corpus).with_name("dev.json")
    if dev.is_file():
        from isorag_pyg.datasets.formats import read_questions

        return [q.text for q in read_questions(dev)[1][:500]]
    return ["Who directed the film?", "Where was the author born?"]


def isorag(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", *args], check=False, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"isorag {args[0]} failed: {done.stderr.strip()[-500:]}")
    return done


def generation(index_dir: Path) -> int:
    return int(json.loads((index_dir / "manifest.json").read_text()).get("generation", 0))


def write_jsonl(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


async def client(url: str, truth: Truth, questions: list[str], tally: Tally, stop: asyncio.Event, seed: int) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        while not stop.is_set():
            own = rng.random() < 0.5
            if own:
                pid = rng.choice(truth.ids[truth.latest])
                body = {"questions": [truth.query(pid)], "k": 5, "retriever": "dense"}
            else:
                pid, body = None, {"questions": [rng.choice(questions)], "k": 5, "retriever": "iso"}
            start = time.perf_counter()
            try:
                response = await http.post("/retrieve", json=body)
            except httpx.HTTPError as err:
                tally.note("failures", f"{type(err).__name__}: {err}")
                tally.row()["requests"] += 1
                continue
            row = tally.row()
            row["requests"] += 1
            row["latencies"].append(time.perf_counter() - start)
            if response.status_code != 200:
                tally.note("failures", f"{response.status_code} {response.text[:200]}")
                continue
            served = int(response.headers["X-Index-Version"])
            row["versions"].add(served)
            held = truth.versions.get(served)
            hits = response.json()[0]["results"]
            if held is None or any(h["id"] not in held or truth.passages[h["id"]] != (h["title"], h["text"]) for h in hits):
                tally.note("wrong", f"version {served}: {[h['id'] for h in hits]}")
            elif pid is not None and pid not in {h["id"] for h in hits}:
                tally.note("lost", f"version {served}: {pid} not returned for its own text")


def adder(index_dir: Path, url: str, batches: list[list[dict[str, str]]], every: float, truth: Truth, stop: threading.Event,
          log: list[dict[str, Any]], work: Path, t0: float) -> None:
    """Another process adds batch ``i`` at ``t0 + (i + 1) * every`` seconds; then the server reloads."""
    for i, batch in enumerate(batches):
        if stop.wait(max(0.0, t0 + (i + 1) * every - time.monotonic())):
            return
        start = time.monotonic()
        isorag("add", str(index_dir), str(write_jsonl(work / f"add{i}.jsonl", batch)))
        version = generation(index_dir)
        truth.add_version(version, truth.versions[truth.latest] | {r["id"] for r in batch})
        reloaded = httpx.post(f"{url}/reload", json={}, timeout=120).json()
        truth.latest = reloaded["version"]
        log.append({"at_s": start - t0, "added": len(batch), "version": version, "add_s": time.monotonic() - start, "reload": reloaded})
        print(f"  add {i + 1}/{len(batches)}: {len(batch)} passages -> version {version} ({reloaded['passages']} passages served)",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=f"{DATA_DIR}/2wikimultihopqa/corpus.json", help="a corpus file, or 'synthetic'")
    parser.add_argument("--limit", type=int, default=None, help="passages of the corpus to use (default: all)")
    parser.add_argument("--duration", type=float, default=600, help="seconds of load (default: 600)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent closed-loop clients (default: 64)")
    parser.add_argument("--add-every", type=float, default=30, help="seconds between adds (default: 30)")
    parser.add_argument("--add-fraction", type=float, default=0.01, help="fraction of the corpus per add (default: 0.01)")
    parser.add_argument("--window", type=float, default=30, help="seconds per reported window (default: 30)")
    parser.add_argument("--warm-up", type=float, default=60, help="seconds before RSS growth is measured from (default: 60)")
    parser.add_argument("--plot", default=str(REPO / "docs" / "soak.png"), help="where to draw the plot ('' for none)")
    args = parser.parse_args()
    if not (0 < args.duration <= 3600 and 1 <= args.clients <= 256 and 0 < args.add_fraction <= 0.05 and args.add_every > 0):
        parser.error("bounded runs only: duration in (0, 3600] s, 1-256 clients, add fraction in (0, 0.05]")

    records = read_passages(args.corpus, args.limit)
    per_add = max(1, round(len(records) * args.add_fraction))
    adds = int((args.duration - 1e-9) // args.add_every)  # each one inside the run
    base, held_back = records[: len(records) - per_add * adds], records[len(records) - per_add * adds:]
    batches = [held_back[i * per_add:(i + 1) * per_add] for i in range(adds)]
    truth = Truth({r["id"]: (r["title"], r["text"]) for r in records})
    questions = questions_for(args.corpus)

    with tempfile.TemporaryDirectory(prefix="isorag-soak-") as tmp:
        work = Path(tmp)
        index_dir = work / "index"
        started = time.monotonic()
        isorag("index", str(write_jsonl(work / "base.jsonl", base)), str(index_dir), "--p", "0", "--quiet")
        print(f"built the index over {len(base)} passages in {time.monotonic() - started:.0f} s; {adds} adds of {per_add} held back",
              flush=True)
        truth.latest = generation(index_dir)
        truth.add_version(truth.latest, frozenset(r["id"] for r in base))
        log_path = work / "serve.log"
        with open(log_path, "w") as stderr:
            server = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "serve", str(index_dir), "--host", "127.0.0.1", "--port", "0"],
                                      stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO)
        try:
            url = wait_for(server, log_path)
            result = drive(url, server, index_dir, truth, questions, batches, args, work)
        finally:
            server.terminate()
            server.wait(30)
        result.update(corpus=str(args.corpus), base_passages=len(base), per_add=per_add, adds_planned=adds,
                      final_passages=len(base) + per_add * len(result["adds"]))
    path = write_json("soak.json", result)
    if args.plot:
        plot(result, Path(args.plot))
    print_summary(result, path)


def wait_for(server: subprocess.Popen, log: Path, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := re.search(r"listening on (http://\S+)", log.read_text()):
            return found.group(1)
        if server.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError("the server did not start")


def drive(url: str, server: subprocess.Popen, index_dir: Path, truth: Truth, questions: list[str], batches: list[list[dict[str, str]]],
          args: argparse.Namespace, work: Path) -> dict[str, Any]:
    tally = Tally(args.window)
    process = psutil.Process(server.pid)
    rss: list[tuple[float, float]] = []
    adds: list[dict[str, Any]] = []
    stop_adding = threading.Event()
    start_time = tally.start = time.monotonic()
    writer = threading.Thread(target=adder, args=(index_dir, url, batches, args.add_every, truth, stop_adding, adds, work, start_time),
                              daemon=True)
    writer.start()

    async def run() -> None:
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                rss.append((time.monotonic() - start_time, process.memory_info().rss / 2**20))
                await asyncio.sleep(min(5.0, args.window / 2))

        tasks = [asyncio.create_task(client(url, truth, questions, tally, stop, seed)) for seed in range(args.clients)]
        tasks.append(asyncio.create_task(sample()))
        await asyncio.sleep(args.duration)
        stop.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())
    stop_adding.set()
    writer.join()
    health = httpx.get(f"{url}/health", timeout=30).json()
    windows = []
    for slot in sorted(tally.rows):
        row = tally.rows[slot]
        latencies = np.array(row.pop("latencies")) * 1000
        windows.append({"t_s": (slot + 1) * args.window, **row, "versions": sorted(row["versions"]),
                        "p50_ms": float(np.percentile(latencies, 50)) if latencies.size else None,
                        "p99_ms": float(np.percentile(latencies, 99)) if latencies.size else None})
    after = [(t, mib) for t, mib in rss if t >= args.warm_up]
    # RSS swings by batch (64 long questions at once): compare the medians of the first and the last minute after warm-up
    first = [mib for t, mib in after if t < args.warm_up + 60]
    last = [mib for t, mib in after if t >= rss[-1][0] - 60]
    growth = float(np.median(last) / np.median(first) - 1) if first and last else None
    all_latencies = [w for w in windows if w["p50_ms"] is not None]
    return {
        "args": {k: v for k, v in vars(args).items() if k != "plot"},
        "totals": {key: sum(w[key] for w in windows) for key in ("requests", "failures", "wrong", "lost")},
        "rss_mib_after_warm_up": [float(np.median(first)), float(np.median(last))] if first and last else None,
        "rss_mib_range_after_warm_up": [min(m for _, m in after), max(m for _, m in after)] if after else None,
        "rss_growth_after_warm_up": growth,
        "p50_ms_median_window": float(np.median([w["p50_ms"] for w in all_latencies])) if all_latencies else None,
        "p99_ms_worst_window": max((w["p99_ms"] for w in all_latencies), default=None),
        "windows": windows, "rss": [{"t_s": t, "mib": mib} for t, mib in rss], "adds": adds,
        "server_stats": health["stats"], "served_version": health["version"], "served_passages": health["passages"],
        "examples": tally.examples,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = result["windows"]
    t = [w["t_s"] for w in windows]
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    window = result["args"]["window"]
    axes[0].plot(t, [w["requests"] / window for w in windows], label="requests/s")
    axes[0].plot(t, [w["failures"] + w["wrong"] + w["lost"] for w in windows], label="failed + wrong + lost", color="red")
    axes[0].legend()
    axes[1].plot(t, [w["p50_ms"] for w in windows], label="p50")
    axes[1].plot(t, [w["p99_ms"] for w in windows], label="p99")
    axes[1].set_ylabel("latency (ms)")
    axes[1].legend()
    axes[2].plot([r["t_s"] for r in result["rss"]], [r["mib"] for r in result["rss"]])
    axes[2].set_ylabel("server RSS (MiB)")
    axes[2].set_xlabel("seconds")
    for add in result["adds"]:
        for axis in axes:
            axis.axvline(add["at_s"], color="grey", alpha=0.3, linewidth=0.8)
    axes[0].set_title(f"isorag serve, {result['args']['clients']} clients, an add + reload every {result['args']['add_every']:g} s (grey)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def print_summary(result: dict[str, Any], path: Path) -> None:
    totals = result["totals"]
    print(f"{totals['requests']} requests: {totals['failures']} failed, {totals['wrong']} wrong, {totals['lost']} lost; "
          f"{len(result['adds'])} adds and reloads; {result['served_passages']} passages served at the end (version {result['served_version']})")
    print(f"p50 {result['p50_ms_median_window']:.1f} ms (median window), p99 {result['p99_ms_worst_window']:.1f} ms (worst window); "
          f"RSS (median of the first and last minute after warm-up) {result['rss_mib_after_warm_up'][0]:.0f} -> "
          f"{result['rss_mib_after_warm_up'][1]:.0f} MiB ({100 * result['rss_growth_after_warm_up']:+.1f} %)"
          if result["rss_growth_after_warm_up"] is not None else "")
    for line in result["examples"][:5]:
        print("  e.g.", line)


if __name__ == "__main__":
    main()
