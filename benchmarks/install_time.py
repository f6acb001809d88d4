"""How long a contributor waits for a test environment: ``pip install -e ".[test]"`` (the fast
tier's, the README's test command) against ``pip install -e ".[dev]"`` (every extra), each in a
fresh virtual environment that already holds torch (``pip install torch==2.13.0``, untimed: both
commands start from it), alternating the two round by round; and what ``.[dev]`` adds on top of
an environment that has ``.[test]`` (the extras alone).

Both installs read the same pip cache and package index, so the ratio compares what each extra
pulls in, not the network."""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import REPO, write_json

TORCH = "torch==2.13.0"


def _fresh_venv(path: Path) -> list[str]:
    """A new venv at ``path`` holding torch; its ``pip install -q`` command."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    pip = [str(path / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH], check=True, capture_output=True)
    return pip


def _timed(pip: list[str], extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([*pip, "-e", f"{REPO}[{extra}]"], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="installs of each extra, alternating (default: 3)")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"test": [], "dev": [], "dev_on_top_of_test": []}
    with tempfile.TemporaryDirectory(prefix="isorag-install-") as tmp:
        for r in range(args.rounds):
            for extra in ("test", "dev") if r % 2 == 0 else ("dev", "test"):
                venv = Path(tmp) / f"venv-{extra}"
                pip = _fresh_venv(venv)
                seconds[extra].append(_timed(pip, extra))
                if extra == "test":
                    seconds["dev_on_top_of_test"].append(_timed(pip, "dev"))
                shutil.rmtree(venv)
                print(f"round {r + 1}: .[{extra}] {seconds[extra][-1]:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    medians = {name: round(statistics.median(values), 1) for name, values in seconds.items()}
    ratio = medians["dev"] / medians["test"]
    print(f"median .[test] {medians['test']} s, .[dev] {medians['dev']} s ({ratio:.2f}x .[test]); "
          f".[dev] on top of .[test]: {medians['dev_on_top_of_test']} s")
    write_json("install_time.json", {"rounds": args.rounds, "seconds": seconds, "median_s": medians, "dev_over_test": round(ratio, 2),
                                     "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
