"""One writer at a time, readers that see one version, no debris from dead writers, files that
follow the umask."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from index_helpers import all_passages, build, passages, write_jsonl

from isorag_pyg import ISORAGIndex
from isorag_pyg.store.locking import IndexLockTimeout, StaleIndexError
from isorag_pyg.store.storage import MANIFEST


@pytest.mark.slow
def test_concurrent_adds_both_land(copy, tmp_path):
    """Two `isorag add` at once (records without ids): both exit 0, every passage lands, no id twice."""
    files = [write_jsonl(tmp_path / f"more{j}.jsonl", [{k: v for k, v in r.items() if k != "id"} for r in passages(10, 100 + 20 * j)])
             for j in range(2)]
    for attempt in range(2):
        runs = [subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "add", str(copy), str(f)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for f in files]
        outputs = [run.communicate(timeout=600) for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outputs
        # the second time every passage is there already: no made-up "dropped" ids, and nothing saved
        assert attempt == 0 or all("10 duplicates skipped;" in out and "unchanged)" in out for out, _ in outputs), outputs
        index = ISORAGIndex.load(copy)
        ids = index.passages.ids
        assert len(index) == 40 and len(set(ids)) == len(ids), (len(index), outputs)
    assert index.generation == 1 + 2  # each add with something new saved a version

READER = """
import json, sys, time
from isorag_pyg.index import ISORAGIndex
truth, versions = json.load(open(sys.argv[2]))
loads = 0
while True:
    index = ISORAGIndex.load(sys.argv[1])
    got = [(p.id, p.text) for p in index.passages]
    assert all(truth[i] == text for i, text in got), "a passage of another version"
    assert sorted(i for i, _ in got) in versions, f"a mix of versions: {len(got)} passages"
    loads += 1
    if loads >= 5 and open(sys.argv[3]).read() == "done":
        break
print(loads)
"""

SAVER = """
import sys
from isorag_pyg.index import ISORAGIndex
index = ISORAGIndex.load(sys.argv[1])
print("loaded", flush=True)
while True:
    index.save(sys.argv[2])
"""

def test_a_stale_writer_is_refused_and_a_busy_lock_times_out(copy):
    first, second = ISORAGIndex.load(copy), ISORAGIndex.load(copy)
    first.remove(["p3"])
    first.save(copy)
    second.remove(["p4"])
    with pytest.raises(StaleIndexError, match="changed on disk since it was loaded"):
        second.save(copy)
    assert ISORAGIndex.load(copy).passages.row_of("p4") is not None  # the first writer's work is there, untouched
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from isorag_pyg.store.locking import index_lock
        with index_lock({str(copy)!r}):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with pytest.raises(IndexLockTimeout, match="another writer"):
            first.save(copy, lock_timeout=0.5)
        assert 0.4 < time.monotonic() - start < 10
    finally:
        holder.kill()
        holder.wait()
    first.save(copy, lock_timeout=5)  # the kernel released the dead holder's lock

def test_an_opened_index_keeps_reading_its_version(copy):
    """Opened in one place, `remove` saved from another: the opened index reads exactly its version."""
    reader = ISORAGIndex.load(copy)
    before = all_passages(reader)
    writer = ISORAGIndex.load(copy)
    writer.remove(["p0", "p1", "p2"])
    writer.save(copy)
    assert all_passages(reader) == before
    hits = reader.retrieve(["Velmora 0 is a town 0 miles from Kostrov 1, known for craft number 0."], k=20, retriever="bm25")[0]
    assert {(h.id, h.title, h.text) for h in hits} == set(before)  # p0 to p2 included: this version still has them
    assert len(ISORAGIndex.load(copy)) == 17

@pytest.mark.slow
def test_readers_racing_a_writer_always_see_one_version(tmp_path):
    """A reader process loading and reading every passage while a writer process saves other versions."""
    versions = [passages(30), passages(30)[7:] + passages(9, 50)]
    truth = {r["id"]: r["text"] for v in versions for r in v}
    for i, version in enumerate(versions):
        build(version).save(tmp_path / f"v{i}")
    target = ISORAGIndex.load(tmp_path / "v0").save(tmp_path / "index")
    (tmp_path / "truth.json").write_text(json.dumps([truth, [sorted(r["id"] for r in v) for v in versions]]))
    (tmp_path / "flag").write_text("")
    reader = subprocess.Popen([sys.executable, "-c", READER, str(target), str(tmp_path / "truth.json"), str(tmp_path / "flag")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from isorag_pyg.index import ISORAGIndex
        for i in range(60):
            ISORAGIndex.load({str(tmp_path)!r} + f"/v{{i % 2}}").save({str(target)!r})
        """)], check=False, capture_output=True, text=True, timeout=600)
    (tmp_path / "flag").write_text("done")
    out, err = reader.communicate(timeout=600)
    assert writer.returncode == 0, writer.stderr[-2000:]
    assert reader.returncode == 0, err[-2000:]
    assert int(out) >= 5

def test_debris_of_dead_writers_is_removed_and_live_ones_kept(copy):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True).stdout.strip()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        debris = copy.parent / f".{copy.name}.tmp-{dead}-0123abcd"
        live = copy.parent / f".{copy.name}.tmp-{sleeper.pid}-4567abcd"
        legacy = copy.parent / f".{copy.name}.tmp-89abcdef"
        for folder in (debris, live, legacy):
            folder.mkdir()
            (folder / "tensors.safetensors").write_bytes(b"half written")
        ISORAGIndex.load(copy).save(copy)
        assert not debris.exists() and not legacy.exists() and live.exists()
    finally:
        sleeper.kill()
        sleeper.wait()

@pytest.mark.slow
def test_kill_9_during_save_leaves_debris_that_the_next_writer_removes(tmp_path):
    big = build(passages(400)).save(tmp_path / "big")
    target = ISORAGIndex.load(big).save(tmp_path / "index")
    before = all_passages(ISORAGIndex.load(target))
    kills = 0
    for _ in range(5):
        saver = subprocess.Popen([sys.executable, "-c", SAVER, str(big), str(target)], stdout=subprocess.PIPE, text=True)
        assert saver.stdout.readline().strip() == "loaded"
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".index.tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.005)
        saver.send_signal(signal.SIGKILL)
        saver.wait()
        kills += bool(list(tmp_path.glob(".index.tmp-*")))
        assert all_passages(ISORAGIndex.load(target)) == before  # the old index intact
    assert kills >= 1, "no save was caught in the middle"
    ISORAGIndex.load(target).save(target)
    assert not list(tmp_path.glob(".index.tmp-*")) and not list(tmp_path.glob(".index.old-*"))

def test_saved_files_follow_the_umask(tmp_path):
    index = build(passages(6))
    index.set_ann("hnsw")
    old = os.umask(0o022)
    try:
        saved_dir = index.save(tmp_path / "index")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in saved_dir.iterdir()}
    listed = set(json.loads((saved_dir / MANIFEST).read_text())["files"])  # with the automatic graph, entities.json too
    assert {"passages.jsonl", "tensors.safetensors", "ann.safetensors"} <= listed
    assert modes == {name: 0o644 for name in {MANIFEST, *listed}}
    assert stat.S_IMODE(saved_dir.stat().st_mode) == 0o755
