"""How long the ``isorag`` command takes, each command beside ``python -c "import torch"`` in the
same run: ``--help``, ``info``, ``query`` on a 1,000-passage index (warm page cache, and cold: the
index's and the exported encoder's files evicted from it; and on two torch threads), and ``index``
of 100 passages. Commands
alternate round by round (their order rotates); the page reports medians and ratios to torch's
import.

The commands run as ``python -m isorag_pyg.cli`` from this checkout (what the ``isorag`` script
runs), in a fresh ``$ISORAG_CACHE_DIR`` where ``isorag index`` built the 1,000-passage index (and
exported the encoder) before timing. ``--compare DIR`` times the same commands from another
checkout, interleaved (e.g. the code before a change). The query's top k is checked against
``ISORAGIndex.load(...).retrieve(...)`` (questions through sentence-transformers on torch) first.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from isorag_pyg import ISORAGIndex

from .common import REPO, add_override_argument, setup, write_json


def _run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    """Wall-clock seconds of ``command`` (run in ``cwd``: its checkout's code) and the process."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:6])} ... failed: {done.stderr[-2000:]}")
    return seconds, done


def _evict(paths: list[Path]) -> None:
    """Drop these files' pages from the page cache (``posix_fadvise``: no root needed)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _jsonl(path: Path, passages: list, tag: str = "") -> Path:
    path.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": f"{p.text}{tag}"}) + "\n" for p in passages))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of every command (default: 5)")
    parser.add_argument("--passages", type=int, default=1000, help="passages of the queried index (default: 1000, the first of the corpus)")
    parser.add_argument("--compare", type=Path, default=None, help="another checkout whose isorag commands run beside this one's")
    parser.add_argument("--dataset", default="2wikimultihopqa", help="whose corpus and questions (default: 2wikimultihopqa)")
    add_override_argument(parser)
    args = parser.parse_args()
    data = setup(f"dataset={args.dataset}", *args.override).dataset
    corpus, questions = data.corpus[: args.passages], [q.text for q in data.questions[:5]]
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="isorag-cli-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "ISORAG_CACHE_DIR": str(work / "cache")}
        env.pop("ISORAG_DEBUG", None)
        start = time.perf_counter()
        _run([python, "-m", "isorag_pyg.cli", "index", str(_jsonl(work / "corpus.jsonl", corpus)), str(work / "index"), "-q"], env, REPO)
        setup_s = time.perf_counter() - start
        # the fast path ranks as the library does with torch's question vectors
        _, out = _run([python, "-m", "isorag_pyg.cli", "query", str(work / "index"), *questions, "-k", "3", "--json"], env, REPO)
        cli_top = [[r["id"] for r in json.loads(line)["results"]] for line in out.stdout.splitlines()]
        os.environ["ISORAG_CACHE_DIR"] = env["ISORAG_CACHE_DIR"]
        library_top = [[h.id for h in hits] for hits in ISORAGIndex.load(work / "index").retrieve(questions, k=3)]
        _, timings = _run([python, "-m", "isorag_pyg.cli", "query", str(work / "index"), questions[0], "-k", "3", "--timings"], env, REPO)
        exported = sorted((work / "cache" / "backends").rglob("*")) if (work / "cache" / "backends").is_dir() else []
        cold_files = [p for p in [*(work / "index").iterdir(), *exported] if p.is_file()]
        checkouts = {"": REPO, **({"compare:": args.compare.resolve()} if args.compare else {})}
        commands = {"python -c 'import torch'": (None, [python, "-c", "import torch"])}
        for label, checkout in checkouts.items():
            cli = [python, "-m", "isorag_pyg.cli"]
            commands |= {f"{label}isorag --help": (checkout, [*cli, "--help"]),
                         f"{label}isorag info": (checkout, [*cli, "info", str(work / "index")]),
                         f"{label}isorag query (warm)": (checkout, [*cli, "query", str(work / "index"), questions[0], "-k", "3"]),
                         f"{label}isorag query (cold)": (checkout, [*cli, "query", str(work / "index"), questions[0], "-k", "3"]),
                         f"{label}isorag index (100 passages)": (checkout, [*cli, "index", "{corpus100}", "{out}", "--quiet"])}
        commands["isorag query --threads 2 (warm)"] = (REPO, [python, "-m", "isorag_pyg.cli", "query", str(work / "index"), questions[0], "-k", "3",
                                                              "--threads", "2"])
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for r in range(args.rounds):
            for i in range(len(names)):
                name = names[(i + r) % len(names)]
                checkout, command = commands[name]
                if "(cold)" in name:
                    _evict(cold_files)
                if "index (100" in name:  # texts of their own each run: no embedding-cache hit
                    small = _jsonl(work / f"small-{r}-{i}.jsonl", corpus[:100], tag=f" ({name} run {r})")
                    command = [part.replace("{corpus100}", str(small)).replace("{out}", str(work / f"small-{r}-{i}")) for part in command]
                elapsed, _ = _run(command, env, checkout or REPO)
                seconds[name].append(elapsed)
            print(f"round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    torch_s = statistics.median(seconds["python -c 'import torch'"])
    rows = {name: {"median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3), "max_s": round(max(values), 3),
                   "ratio_to_import_torch": round(statistics.median(values) / torch_s, 2), "runs_s": [round(v, 3) for v in values]}
            for name, values in seconds.items()}
    print(f"\n{'command':42s} {'median s':>9s} {'min-max s':>13s} {'x import torch':>15s}")
    for name, row in rows.items():
        print(f"{name:42s} {row['median_s']:9.2f} {row['min_s']:6.2f}-{row['max_s']:<6.2f} {row['ratio_to_import_torch']:15.2f}")
    print(f"query top 3 equal to ISORAGIndex.load(...).retrieve(...) on {len(questions)} questions: {cli_top == library_top}")
    write_json("cli_latency.json", {"rounds": args.rounds, "dataset": args.dataset, "passages": len(corpus), "index_setup_s": round(setup_s, 1),
                                    "query_timings": json.loads(timings.stderr.strip().splitlines()[-1]),
                                    "same_top_k_as_library": cli_top == library_top, "compare": str(args.compare) if args.compare else None,
                                    "cold": "the index folder's and the exported encoder's files evicted (posix_fadvise) before each run",
                                    "commands": rows, "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
