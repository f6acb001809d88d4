"""An update keeps the index's modes (the umask of whoever updates it does not widen or narrow
them); a first save follows the umask; a save killed midway leaves nothing more readable than the index behind."""
from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from index_helpers import build, isorag, passages, write_jsonl
from test_writers import SAVER

from isorag_pyg import ISORAGIndex
from isorag_pyg.store.permissions import Permissions


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes(directory: Path) -> tuple[int, dict[str, int]]:
    return stat.S_IMODE(directory.stat().st_mode), {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}


def set_modes(directory: Path, directory_mode: int, file_mode: int) -> None:
    for path in directory.iterdir():
        path.chmod(file_mode)
    directory.chmod(directory_mode)


@pytest.mark.parametrize("mask,directory_mode,file_mode", [(0o022, 0o700, 0o600), (0o077, 0o750, 0o640)])
def test_a_save_over_an_index_keeps_its_modes_under_any_umask(tmp_path, monkeypatch, mask, directory_mode, file_mode):
    """Before: `chmod 700 priv; chmod 600 priv/*; isorag add priv more.jsonl` under umask 022 left
    755 and 644, every passage readable by every local user."""
    target = build(passages(8)).save(tmp_path / "index")
    set_modes(target, directory_mode, file_mode)
    private_while_written = []
    apply_directory = Permissions.apply_directory
    monkeypatch.setattr(Permissions, "apply_directory",
                        lambda self, path: private_while_written.append(stat.S_IMODE(path.stat().st_mode)) or apply_directory(self, path))
    with umask(mask):
        index = ISORAGIndex.load(target)
        index.add(passages(2, 50))
        index.save(target)
        index.remove(["p0"])
        index.save(target)
        index.set_ann("hnsw")  # a file the earlier versions did not have: the manifest's mode
        index.save(target)
    directory, files = modes(target)
    assert "ann.safetensors" in files and directory == directory_mode and set(files.values()) == {file_mode}, (oct(directory), files)
    assert private_while_written == [0o700] * 3  # the new version was private until just before the swap
    assert len(ISORAGIndex.load(target)) == 9


def test_a_first_save_follows_the_umask(tmp_path):
    with umask(0o077):
        first = build(passages(4)).save(tmp_path / "index")
    directory, files = modes(first)
    assert directory == 0o700 and set(files.values()) == {0o600}


@pytest.mark.slow
@pytest.mark.parametrize("mask,directory_mode,file_mode", [(0o022, 0o700, 0o600), (0o077, 0o755, 0o644)])
def test_isorag_add_remove_and_a_killed_save_keep_the_modes(tmp_path, mask, directory_mode, file_mode):
    target = build(passages(200)).save(tmp_path / "index")
    set_modes(target, directory_mode, file_mode)
    expected = modes(target)
    with umask(mask):
        added = isorag("add", str(target), str(write_jsonl(tmp_path / "more.jsonl", passages(2, 500))))
        assert added.returncode == 0, added.stderr[-2000:]
        assert modes(target) == expected
        removed = isorag("remove", str(target), "p500")
        assert removed.returncode == 0 and modes(target) == expected, removed.stderr[-2000:]
        saver = subprocess.Popen([sys.executable, "-c", SAVER, str(target), str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert saver.stdout.readline().strip() == "loaded"
        deadline = time.monotonic() + 60
        while not (debris := list(tmp_path.glob(".index.tmp-*"))) and time.monotonic() < deadline:
            time.sleep(0.005)
        saver.send_signal(signal.SIGKILL)
        saver.wait()
    finally:
        if saver.poll() is None:
            saver.kill()
    assert debris, "no save was caught in the middle"
    # Nothing of a killed save is more readable than the index itself: a folder still being written
    # is 0700; one killed in the instant between its final modes and the swap (or, after the swap,
    # the previous version being removed) has exactly the index's modes.
    for path in [path for path in debris if path.exists()]:
        directory, files = modes(path)
        assert directory == 0o700 or (directory == directory_mode and set(files.values()) <= {file_mode}), (oct(directory), files)
    assert modes(target) == expected and len(ISORAGIndex.load(target)) == 201
