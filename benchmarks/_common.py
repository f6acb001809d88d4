"""Helpers shared by the benchmark scripts: compose configs and prepare datasets once."""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

REPO = Path(__file__).resolve().parents[1]
CONF = str(REPO / "conf")
# ISORAG_BENCH_RESULTS redirects the JSON (the smoke tests use it to keep benchmarks/results/ untouched)
RESULTS = Path(os.environ.get("ISORAG_BENCH_RESULTS", REPO / "benchmarks" / "results"))
DATA_DIR = os.environ.get("ISORAG_DATA_DIR", str(REPO.parent / "shared" / "datasets"))


def eval_config(*overrides: str) -> DictConfig:
    """The ``eval`` config with overrides (no hydra run directory: output goes to a temp dir)."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("eval", overrides=[f"paths.output_dir={tempfile.mkdtemp(prefix='isorag-bench-')}",
                                         f"++dataset.data_dir={DATA_DIR}", "encoder.show_progress=false",
                                         "train_f_theta=true", *overrides])  # the scripts compare φ with and without f_θ's volumes
    return cfg


def add_override_argument(parser: argparse.ArgumentParser) -> None:
    """``--override KEY=VALUE`` (repeatable): extra hydra overrides of the eval config, in ``args.override``."""
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra hydra override of the eval config (repeatable)")


@cache
def _retriever_base(name: str) -> DictConfig:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        rcfg = compose("eval", overrides=[f"retriever={name}", "paths.output_dir=."]).retriever
    OmegaConf.set_struct(rcfg, False)  # knobs the file does not list (φ's p, shell_floor...) may be added
    return rcfg


def retriever_config(name: str, **overrides: Any) -> DictConfig:
    """``conf/retriever/<name>.yaml`` (composed once per name) with knobs overridden or added."""
    return OmegaConf.merge(_retriever_base(name), overrides)


def machine() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "python": platform.python_version()}


def results_name(name: str) -> str:
    """A JSON file name under ``RESULTS`` (an argparse ``type``: a path with folders is refused
    when the script starts, not when it writes its results)."""
    if Path(name).name != name or not name.endswith(".json"):
        raise argparse.ArgumentTypeError(f"expected a file name ending in .json, written under {RESULTS} (got {name!r})")
    return name


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2))
    print(f"wrote {path}")
    return path


def best_rows(rows: list[dict[str, Any]], retriever: str = "iso") -> dict[str, dict[str, Any]]:
    """Per dataset, the tune_iso.py row of ``retriever`` (real φ where φ applies) with the best
    Recall@5 (the first such in grid order on ties)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["retriever"] != retriever or row.get("phi_mode", "real") != "real":
            continue
        if row["dataset"] not in best or row["recall@5"] > best[row["dataset"]]["recall@5"]:
            best[row["dataset"]] = row
    return best
