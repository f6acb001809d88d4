"""Updates that never lose data: one writer at a time, readers that see one version, ids that never
collide, inputs that name what is wrong, manifests that are checked, a server that follows its
index. Every test here is a row of docs/reliability.md."""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_server import Server

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets.corpus_files import load_corpus
from isorag_pyg.datasets.corpus_report import MAX_PASSAGE_CHARS
from isorag_pyg.datasets.errors import DatasetFormatError
from isorag_pyg.encoders.sentence import model_fingerprint
from isorag_pyg.index import IndexFormatError
from isorag_pyg.index.locking import IndexLockTimeout, StaleIndexError
from isorag_pyg.index.storage import MANIFEST, _manifest_digest
from isorag_pyg.server.engine import RetrievalEngine
from isorag_pyg.server.reloading import ServedIndex

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


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def all_passages(index: ISORAGIndex) -> list[tuple[str, str, str]]:
    return [(p.id, p.title, p.text) for p in index.passages]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    return build(passages(20)).save(tmp_path_factory.mktemp("reliability") / "index")


@pytest.fixture
def copy(saved, tmp_path) -> Path:
    return ISORAGIndex.load(saved).save(tmp_path / "index")


# ------------------------------------------------------------------------------- writers


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
        from isorag_pyg.index.locking import index_lock
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


# ------------------------------------------------------------------------------- readers


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


# ------------------------------------------------------------------------------- debris


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


SAVER = """
import sys
from isorag_pyg.index import ISORAGIndex
index = ISORAGIndex.load(sys.argv[1])
print("loaded", flush=True)
while True:
    index.save(sys.argv[2])
"""


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


# ------------------------------------------------------------------------------- ids


def test_added_passages_without_ids_get_ids_that_never_collide(tmp_path):
    index = build([{k: v for k, v in r.items() if k != "id"} for r in passages(6)])
    assert index.passages.ids == ["0", "1", "2", "3", "4", "5"]
    index.remove(["5", "2"])
    index.add([{k: v for k, v in r.items() if k != "id"} for r in passages(2, 10)])
    assert index.passages.ids[-2:] == ["6", "7"]  # never "0", "1" again, nor the removed "5"
    loaded = ISORAGIndex.load(index.save(tmp_path / "index"))
    assert loaded.next_id == 8
    loaded.add([{"id": "41", **{k: v for k, v in passages(1, 20)[0].items() if k != "id"}}])
    loaded.add([{k: v for k, v in r.items() if k != "id"} for r in passages(1, 30)])
    assert loaded.passages.ids[-1] == "42"  # past every number ever given
    done = isorag("add", str(loaded.save(tmp_path / "index")), str(write_jsonl(tmp_path / "more.jsonl", [
        {k: v for k, v in r.items() if k != "id"} for r in passages(2, 40)])))
    assert done.returncode == 0, done.stderr[-2000:]
    assert ISORAGIndex.load(tmp_path / "index").passages.ids[-2:] == ["43", "44"]


def test_a_file_mixing_records_with_and_without_ids_is_refused(tmp_path):
    records = passages(5)
    del records[3]["id"]
    with pytest.raises(DatasetFormatError, match=r"record 3: field 'id': has no id"):
        load_corpus(write_jsonl(tmp_path / "mixed.jsonl", records))
    records = passages(5, ids=False)
    records[1]["id"] = "x"
    with pytest.raises(DatasetFormatError, match=r"record 1: field 'id': has an id"):
        load_corpus(write_jsonl(tmp_path / "mixed2.jsonl", records))
    with pytest.raises(ValueError, match="record 1"):
        build(records)


def test_identical_text_under_two_ids_is_reported(copy, tmp_path, caplog):
    twin = {**passages(1, 5)[0], "id": "twin-of-p5"}
    with caplog.at_level(logging.WARNING):
        corpus, _ = load_corpus(write_jsonl(tmp_path / "twins.jsonl", passages(3) + [{**passages(1)[0], "id": "twin-of-p0"}]))
    assert len(corpus) == 3 and "'p0' kept, 'twin-of-p0' dropped" in caplog.text
    index = ISORAGIndex.load(copy)
    update = index.add([twin, *passages(1, 70)])
    assert update.duplicate_ids == [("p5", "twin-of-p5")] and "'p5' kept, 'twin-of-p5' dropped" in update.summary()
    done = isorag("add", str(copy), str(write_jsonl(tmp_path / "twin.jsonl", [twin])))
    assert done.returncode == 0 and "'p5' kept, 'twin-of-p5' dropped" in done.stdout, done.stderr[-2000:]


# ------------------------------------------------------------------------------- inputs


def test_non_utf8_files_name_the_file_and_the_line(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"title": "A", "text": "plain"}\n{"title": "B", "text": "caf\xe9"}\n')
    with pytest.raises(DatasetFormatError, match=r"latin.jsonl: not UTF-8 text: byte 0xe9 on line 2 \(byte offset 59\)"):
        load_corpus(latin)
    csv_file = tmp_path / "latin.csv"
    csv_file.write_bytes(b"title,text\nA,plain\nB,caf\xe9\n")
    with pytest.raises(DatasetFormatError, match=r"latin.csv: not UTF-8 text: byte 0xe9 on line 3"):
        load_corpus(csv_file)
    done = isorag("index", str(latin), str(tmp_path / "out"))
    assert done.returncode == 1 and "line 2" in done.stderr and "Traceback" not in done.stderr


def test_an_unterminated_csv_quote_is_an_error_naming_the_record(tmp_path):
    path = tmp_path / "quote.csv"
    path.write_text('id,title,text\na,A,"fine"\nb,B,"never closed\nc,C,text\n')
    with pytest.raises(DatasetFormatError, match=r"quote.csv: record 1: malformed CSV .* starting on line 3"):
        load_corpus(path)


def test_an_oversized_passage_is_split_like_a_document_or_refused(tmp_path, caplog):
    huge = " ".join(f"Sentence {i} tells of Velmora." for i in range(200_000))  # ~6 MB
    assert len(huge) > MAX_PASSAGE_CHARS
    path = write_jsonl(tmp_path / "huge.jsonl", [{"id": "big", "title": "Big", "text": huge}, {"id": "small", "title": "S", "text": "small"}])
    with caplog.at_level(logging.WARNING):
        corpus, report = load_corpus(path, max_tokens=200)
    assert report.split_long == ["big"] and "over 20000 characters split" in caplog.text
    assert corpus[-1].id == "small" and corpus[0].id == "big#0" and len(corpus) > 1000
    assert max(len(p.text.split()) for p in corpus) <= 200
    assert " ".join(p.text for p in corpus[:-1]) == huge  # nothing lost
    with pytest.raises(ValueError, match=f"over the limit of {MAX_PASSAGE_CHARS}"):
        build([{"title": "Big", "text": huge}, {"title": "S", "text": "small"}])


def test_usage_errors_are_one_line_and_exit_status_1(copy):
    done = isorag("query", str(copy), "question", "-k", "abc")
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == ["isorag query: error: argument -k: invalid int value: 'abc'"]


# ------------------------------------------------------------------------------- on disk


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
    (directory / MANIFEST).write_text(json.dumps(manifest))


def _with(tensors: dict, key: str, value: torch.Tensor) -> dict:
    return {**tensors, key: value}


def _files_entry_int(m: dict) -> None:
    m["files"]["passages.jsonl"] = 7


def _outside(m: dict) -> None:
    m["files"]["../outside.bin"] = m["files"].pop("passages.jsonl")


def _unlisted(m: dict) -> None:
    del m["files"]["tensors.safetensors"]


def _counts_string(m: dict) -> None:
    m["counts"]["passages"] = "20"


@pytest.mark.parametrize("damage, match", [
    (lambda t: (t, _files_entry_int), r"manifest.json: invalid manifest: files.passages.jsonl"),
    (lambda t: (t, _outside), r"manifest.json: invalid manifest: file '../outside.bin' is not a plain file name"),
    (lambda t: (t, _unlisted), r"manifest.json: invalid manifest: tensors.safetensors is read but not listed"),
    (lambda t: (t, _counts_string), r"manifest.json: invalid manifest: counts.passages"),
    (lambda t: (_with(t, "log_phi", torch.where(torch.arange(t["log_phi"].numel()) == 3, math.nan, t["log_phi"])), None), "'log_phi' holds NaN"),
    (lambda t: (_with(t, "embeddings", t["embeddings"] * math.inf), None), "'embeddings' holds NaN or infinite"),
    (lambda t: (_with(t, "edge_source", t["edge_source"][:-1]), None), r"'edge_source' has shape"),
    (lambda t: (_with(t, "edge_source", t["edge_source"] * 0 + 64), None), r"'edge_source' has values outside"),
    (lambda t: (_with(t, "edge_weight", t["edge_weight"].double()), None), r"'edge_weight' is torch.float64"),
    (lambda t: (_with(t, "passage_offsets", t["passage_offsets"].flip(0)), None), "'passage_offsets' must rise strictly"),
    (lambda t: (_with(t, "knn_edges", torch.tensor([[0], [99]])), None), r"'knn_edges' has values outside"),
])
def test_a_manifest_or_tensors_a_writer_got_wrong_are_an_index_format_error(copy, damage, match):
    tensors, edit = damage(load_file(copy / "tensors.safetensors"))
    rewrite(copy, tensors, edit)
    with pytest.raises(IndexFormatError, match=match):
        ISORAGIndex.load(copy)


def test_ball_coordinates_outside_the_ball_are_refused(tmp_path):
    index = ISORAGIndex.build(passages(12), phi=PhiSpec(p=1.0), progress=False, f_theta=_quick_f_theta())
    directory = index.save(tmp_path / "index")
    tensors = load_file(directory / "tensors.safetensors")
    rewrite(directory, _with(tensors, "z", tensors["z"] * 100))
    with pytest.raises(IndexFormatError, match="outside the Poincaré ball"):
        ISORAGIndex.load(directory)


def _quick_f_theta():
    from isorag_pyg import FThetaConfig
    from isorag_pyg.training.config import DEFAULT_TRAINER

    return FThetaConfig(trainer={**DEFAULT_TRAINER, "max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False})


def test_an_index_cannot_make_load_or_retrieve_run_code(copy, tmp_path):
    """A manifest naming an encoder folder with custom module code: refused, the code never runs."""
    import re

    import sentence_transformers
    from packaging.requirements import Requirement

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    pinned = Requirement(re.search(r'"(sentence-transformers[^"]*)"', pyproject).group(1))
    assert not pinned.specifier.contains("5.9") and pinned.specifier.contains(sentence_transformers.__version__)  # 6.0 refuses custom code
    model = tmp_path / "evil_model"
    model.mkdir()
    marker = tmp_path / "pwned"
    (model / "evil_module.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass Evil:\n    pass\n")
    (model / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "evil_module.Evil"}]))
    (model / "config_sentence_transformers.json").write_text(json.dumps({"__version__": {"sentence_transformers": "6.0.0"}}))

    def point_at_evil(m: dict) -> None:
        m["encoder"] = {**m["encoder"], "name": str(model), "fingerprint": model_fingerprint(str(model))}

    rewrite(copy, edit=point_at_evil)
    index = ISORAGIndex.load(copy)
    with pytest.raises(Exception, match="trust_remote_code|not part of Sentence Transformers"):
        index.retrieve(["Which town is known for craft number 5?"], k=2)
    sys.path.insert(0, str(model))
    try:
        with pytest.raises(Exception, match="trust_remote_code|not part of Sentence Transformers"):
            ISORAGIndex.load(copy).retrieve(["again, with the module importable"], k=2)
    finally:
        sys.path.remove(str(model))
    assert not marker.exists()


# ------------------------------------------------------------------------------- the server


def test_ports_outside_the_valid_range_are_refused(copy):
    for port in ("70000", "-1"):
        done = isorag("serve", str(copy), "--port", port)
        assert done.returncode == 1, done
        assert done.stderr.strip().splitlines()[-1] == f"isorag serve: error: port must lie between 1 and 65535 (or 0 for a free one), got {port}"


@pytest.mark.slow
def test_the_server_follows_its_index_without_a_failed_request(copy, tmp_path):
    server = Server(copy, tmp_path / "serve.log", "--batch-window-ms", "5").ready()
    try:
        info = server.client.get("/info").json()
        assert (info["version"], info["passages"]) == (ISORAGIndex.load(copy).generation, 20)
        assert server.client.post("/reload").json() == {"reloaded": False, "version": info["version"], "passages": 20}
        failures, versions, stop = [], set(), threading.Event()

        def client() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                while not stop.is_set():
                    response = http.post("/retrieve", json={"questions": ["Which town is known for craft number 71?"], "k": 3,
                                                            "retriever": "bm25"})
                    if response.status_code != 200:
                        failures.append(response.text)
                        continue
                    version = int(response.headers["X-Index-Version"])
                    versions.add(version)
                    top = response.json()[0]["results"][0]["id"]
                    if (version > info["version"]) != (top == "p71"):
                        failures.append(f"version {version} answered {top}")

        threads = [threading.Thread(target=client) for _ in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(1)
        done = isorag("add", str(copy), str(write_jsonl(tmp_path / "more.jsonl", passages(1, 71))))
        assert done.returncode == 0, done.stderr[-2000:]
        reloaded = server.client.post("/reload").json()
        assert reloaded == {"reloaded": True, "version": info["version"] + 1, "passages": 21}
        time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join()
        assert not failures, failures[:5]
        assert versions == {info["version"], info["version"] + 1}
        info = server.client.get("/info").json()
        assert (info["version"], info["passages"], info["reloads"]) == (reloaded["version"], 21, 1)
        assert server.client.get("/health").json()["stats"]["failed_requests"] == 0
        (copy / "tensors.safetensors").write_bytes(b"garbage")
        rewrite(copy, edit=lambda m: m.update(generation=m["generation"] + 1))
        refused = server.client.post("/reload")
        assert refused.status_code == 409 and f"still serving version {reloaded['version']}" in refused.json()["detail"]
    finally:
        server.stop()


def test_the_watch_opens_a_bad_version_again_only_after_a_growing_wait(copy, monkeypatch):
    served = ServedIndex(copy, RetrievalEngine(ISORAGIndex.load(copy)))
    loads, now = [], [1000.0]
    real_load = ISORAGIndex.load
    monkeypatch.setattr(ISORAGIndex, "load", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    monkeypatch.setattr("isorag_pyg.server.reloading.time.monotonic", lambda: now[0])
    assert served.poll() is None and loads == []  # nothing new on disk
    good = {key: value.clone() for key, value in load_file(copy / "tensors.safetensors").items()}  # not a view of the file
    (copy / "tensors.safetensors").write_bytes(b"garbage")
    rewrite(copy, edit=lambda m: m.update(generation=m["generation"] + 1))
    with pytest.raises(IndexFormatError):
        served.poll()
    assert (len(loads), served.retry_in_s) == (1, ServedIndex.RETRY_FIRST_S)
    now[0] += 29
    assert served.poll() is None and served.poll() is None and len(loads) == 1  # left alone meanwhile
    with pytest.raises(IndexFormatError):
        served.reload()  # POST /reload opens it whenever asked
    now[0] += 2
    with pytest.raises(IndexFormatError):
        served.poll()  # 30 s on: opened again, still bad, so the wait doubles
    assert (len(loads), served.retry_in_s) == (3, 2 * ServedIndex.RETRY_FIRST_S)
    rewrite(copy, tensors=good)  # repaired under the same version number (a copy that finished landing)
    now[0] += 59
    assert served.poll() is None and len(loads) == 3
    now[0] += 2
    assert served.poll()["reloaded"] and served.version == served.refused_version and len(loads) == 4


@pytest.mark.slow
def test_the_server_watches_its_manifest(copy, tmp_path):
    server = Server(copy, tmp_path / "serve.log", "--watch-seconds", "0.2").ready()
    try:
        version = server.client.get("/info").json()["version"]
        index = ISORAGIndex.load(copy)
        index.remove(["p0"])
        index.save(copy)
        deadline = time.monotonic() + 60
        while server.client.get("/info").json()["version"] == version and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.client.get("/info").json()["passages"] == 19
        (copy / "tensors.safetensors").write_bytes(b"garbage")  # a bad version on disk: kept out, reported once
        rewrite(copy, edit=lambda m: m.update(generation=m["generation"] + 1))
        time.sleep(2)  # ten watch intervals
        assert server.client.get("/info").json()["passages"] == 19
        assert (tmp_path / "serve.log").read_text().count("not reloaded") == 1
    finally:
        server.stop()


@pytest.mark.slow
def test_slow_clients_are_cut_off_and_connections_are_bounded(copy, tmp_path):
    server = Server(copy, tmp_path / "serve.log", "--read-timeout", "1", "--max-connections", "3").ready()
    host, port = server.url.removeprefix("http://").split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=10) as slow:
            request = b'POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"questions": ["a"]'
            slow.settimeout(10)
            start = time.monotonic()
            try:
                for byte in request:
                    slow.sendall(bytes([byte]))
                    time.sleep(0.5)
                received = slow.recv(1024)
            except (BrokenPipeError, ConnectionResetError):
                received = b""
            assert received == b"" and time.monotonic() - start < 6  # cut off after about a second, no answer
        holders = [socket.create_connection((host, int(port)), timeout=10) for _ in range(3)]
        try:
            for holder in holders:
                holder.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            time.sleep(0.3)
            with httpx.Client(base_url=server.url, timeout=10) as fresh:
                assert fresh.get("/health").status_code == 503
        finally:
            for holder in holders:
                holder.close()
        time.sleep(0.3)
        assert server.client.get("/health").status_code == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_soak_smoke_run(tmp_path):
    """benchmarks.soak in seconds: clients, adds by another process, reloads; nothing failed, wrong or lost."""
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.soak", "--corpus", "synthetic", "--limit", "200", "--duration", "30",
                           "--clients", "4", "--add-every", "8", "--add-fraction", "0.02", "--window", "4", "--warm-up", "4",
                           "--plot", str(tmp_path / "soak.png")], check=False, capture_output=True, text=True, timeout=900, env=env,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "soak.json").read_text())
    assert result["totals"]["requests"] > 20 and len(result["adds"]) >= 1  # adds that start after the end are skipped
    assert result["totals"]["failures"] == result["totals"]["wrong"] == result["totals"]["lost"] == 0, result["examples"]
    assert result["served_passages"] == result["base_passages"] + len(result["adds"]) * result["per_add"]
    assert result["served_version"] == result["adds"][-1]["version"] and (tmp_path / "soak.png").stat().st_size > 0
