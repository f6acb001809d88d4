"""A loaded index reads private, sealed copies of its files: truncating, replacing or editing the
files afterwards neither crashes nor changes it; DiskCheck tells that the files changed."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

from index_helpers import all_passages, build, passages

from isorag_pyg import ISORAGIndex
from isorag_pyg.store.disk_check import DiskCheck

READ_AFTER_DAMAGE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from isorag_pyg import ISORAGIndex
    directory, other = Path(sys.argv[1]), Path(sys.argv[2])
    index = ISORAGIndex.load(directory)
    before = [(p.id, p.text) for p in index.passages]
    (directory / "passages.jsonl").write_bytes(b"")                                  # truncate -s 0
    (directory / "tensors.safetensors").write_bytes((other / "tensors.safetensors").read_bytes())  # cp other/* (in place)
    with open(directory / "manifest.json", "r+b") as handle:                         # a byte edited in place
        handle.seek(10)
        handle.write(b"X")
    after = [(p.id, p.text) for p in index.passages]
    hits = index.retrieve([before[7][1]], k=3, retriever="bm25")[0]
    print(json.dumps({"same": before == after, "top": hits[0].id, "rows": int(index.embeddings.shape[0])}))
""")


def test_files_changed_under_a_loaded_index_neither_crash_nor_change_it(tmp_path):
    """Before: passages were memory-mapped and tensors mapped by safetensors, so the next read
    after `truncate -s 0 passages.jsonl` died of SIGBUS, and a byte edited after loading was read
    unverified. In a child process, so that a crash cannot take the test run down."""
    directory = build(passages(12)).save(tmp_path / "index")
    other = build(passages(30, 100)).save(tmp_path / "other")
    run = subprocess.run([sys.executable, "-c", READ_AFTER_DAMAGE, str(directory), str(other)], capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])  # -7: SIGBUS
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"same": True, "top": "p7", "rows": 12}


def test_disk_check_tells_unchanged_changed_restored_and_stale(tmp_path):
    directory = build(passages(6)).save(tmp_path / "index")
    index = ISORAGIndex.load(directory)
    check = DiskCheck(index.origin)
    assert check.state().state == "ok"
    original = (directory / "passages.jsonl").read_bytes()
    (directory / "passages.jsonl").write_bytes(b"")
    state = check.state()
    assert state.state == "changed" and state.problems == ((f"passages.jsonl: 0 bytes, the loaded version's {len(original)} "
                                                           "(truncated or replaced)"),)
    (directory / "passages.jsonl").write_bytes(original.replace(b"town", b"TOWN", 1))  # same size, other bytes
    assert check.state().problems == ("passages.jsonl: its bytes differ from the loaded version's (edited or replaced)",)
    (directory / "passages.jsonl").unlink()
    assert check.state().problems == ("passages.jsonl: missing",)
    (directory / "passages.jsonl").write_bytes(original)  # restored: a new inode and time, the same bytes
    assert check.state().state == "ok" and all_passages(index) == all_passages(ISORAGIndex.load(directory))
    saved = ISORAGIndex.load(directory)
    saved.remove(["p0"])
    saved.save(directory)
    stale = check.state()
    assert stale.state == "stale" and stale.problems == ((f"version {saved.generation} was saved there; this index is version "
                                                         f"{index.generation}"),)
    assert DiskCheck(saved.origin).state().state == "ok"  # a saved index knows its files too
    manifest = json.loads((directory / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps({**manifest, "generation": 99}))  # edited by hand: not a save
    assert check.state().state == "changed" and DiskCheck(saved.origin).state().problems[0].startswith("manifest.json: ")


def test_an_index_refuses_a_file_that_is_not_a_regular_file(tmp_path):
    directory = build(passages(4)).save(tmp_path / "index")
    (directory / "passages.jsonl").unlink()
    (directory / "passages.jsonl").mkdir()
    try:
        ISORAGIndex.load(directory)
    except ValueError as err:
        assert "passages.jsonl: not a regular file" in str(err)
    else:
        raise AssertionError("a folder in place of a file was loaded")
    shutil.rmtree(directory / "passages.jsonl")


def test_an_ann_file_changed_after_loading_is_refused_at_first_use(tmp_path):
    """The ANN index is read on first use (FAISS keeps its own copy): its file is checked then
    against the digest verified at load, so bytes changed in between are refused, not read."""
    index = build(passages(40))
    index.set_ann("hnsw")
    directory = index.save(tmp_path / "index")
    loaded = ISORAGIndex.load(directory)
    with open(directory / "ann.safetensors", "r+b") as handle:
        handle.seek(-8, 2)
        handle.write(b"\x00" * 8)
    try:
        loaded.ann  # noqa: B018 - opens it
    except ValueError as err:
        assert "ann.safetensors: checksum mismatch: changed since the index was opened" in str(err)
    else:
        raise AssertionError("a changed ANN file was read")
    assert ISORAGIndex.load(directory, verify=False).origin.files["ann.safetensors"].bytes > 0
