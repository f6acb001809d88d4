"""Shared fixtures. Tests needing ../shared/datasets fail (not skip) in CI, where it exists."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("ISORAG_CACHE_DIR", str(REPO / ".cache" / "test-embeddings"))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: Devices every device-aware test runs on: CUDA joins where present (the lent GPU machine).
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _shared_dir() -> Path:
    return Path(os.environ.get("ISORAG_DATA_DIR", REPO.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real datasets folder; a missing folder fails in CI and skips elsewhere."""
    path = _shared_dir()
    if not (path / "2wikimultihopqa" / "dev.json").is_file():
        if os.environ.get("CI") or os.environ.get("ISORAG_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"shared datasets required in CI but not found at {path}")
        pytest.skip(f"shared datasets not found at {path}")
    return path
