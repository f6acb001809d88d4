"""Small indexes about made-up places, the isorag command as a subprocess, and a way to rewrite a
saved index's files (as a careless or hostile writer would), shared by the tests of writers,
intake, the CLI and the server."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.store.storage import MANIFEST, _manifest_digest

TOWNS = ["Velmora", "Kostrov", "Aldania", "Brill", "Dara", "Quen", "Orlin", "Sarn", "Tavi", "Umber", "Wend", "Yarrow"]


def passages(count: int, start: int = 0, ids: bool = True) -> list[dict[str, str]]:
    """Distinct passages about made-up places (titles mention each other, so the graph has edges)."""
    out = []
    for i in range(start, start + count):
        town, other = f"{TOWNS[i % len(TOWNS)]} {i}", f"{TOWNS[(i + 1) % len(TOWNS)]} {i + 1}"
        record = {"title": town, "text": f"{town} is a town {i * 7 % 31} miles from {other}, known for craft number {i}."}
        if ids:
            record["id"] = f"p{i}"
        out.append(record)
    return out


def build(records: list[dict[str, str]]) -> ISORAGIndex:
    return ISORAGIndex.build(records, f_theta=None, phi=PhiSpec(p=0.0), progress=False)


def isorag(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ISORAG_DEBUG"}
    return subprocess.run([sys.executable, "-m", "isorag_pyg.cli", *args], check=False, capture_output=True, text=True, env=env, timeout=600, **kwargs)


#: Packages a command answering from an index, or printing help, must not import (each from 0.1 s to seconds).
HEAVY_PACKAGES = frozenset({"torch_geometric", "transformers", "sentence_transformers", "lightning", "pytorch_lightning", "hydra",
                            "omegaconf", "geoopt", "matplotlib", "faiss", "bm25s", "pandas", "wandb", "ray", "openvino"})


def isorag_imports(*args: str, **kwargs) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``isorag *args`` under ``python -X importtime``: the process (its stderr without the
    import lines) and the top-level packages it imported."""
    env = {k: v for k, v in os.environ.items() if k != "ISORAG_DEBUG"}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "isorag_pyg.cli", *args], check=False, capture_output=True, text=True,
                          env=env, timeout=600, **kwargs)
    lines = done.stderr.splitlines()
    packages = {found.group(1).split(".")[0] for line in lines if (found := re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", line))}
    done.stderr = "".join(f"{line}\n" for line in lines if not line.startswith("import time:"))
    return done, packages


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def all_passages(index: ISORAGIndex) -> list[tuple[str, str, str]]:
    return [(p.id, p.title, p.text) for p in index.passages]


def rewrite(directory: Path, tensors: dict | None = None, edit=None) -> None:
    """Change an index as a buggy or malicious writer would: new tensors and/or manifest, every
    checksum recomputed."""
    manifest = json.loads((directory / MANIFEST).read_text())
    if tensors is not None:
        path = directory / "tensors.safetensors"
        save_file(tensors, path)
        manifest["files"]["tensors.safetensors"] = {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if edit is not None:
        edit(manifest)
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    staged = directory / f".{MANIFEST}.rewrite"
    staged.write_text(json.dumps(manifest))
    os.replace(staged, directory / MANIFEST)  # whole: a server watching the index never reads half a manifest


def _with(tensors: dict, key: str, value: torch.Tensor) -> dict:
    return {**tensors, key: value}
