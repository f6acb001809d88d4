"""A server whose index files are truncated, replaced or edited in place keeps serving the version
it loaded and verified, reports the change on /health (logged once), and recovers through the
normal reload path."""
from __future__ import annotations

import logging
import shutil
import threading
import time

import httpx
import pytest
import torch
from fastapi.testclient import TestClient
from index_helpers import build, isorag, passages, write_jsonl
from test_server import Server

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.server import ServerSettings, create_app

PLACES = [{"id": f"p{i}", "title": t, "text": f"{t} is a place{'.' * i}"} for i, t in enumerate(("Paris", "Dijon", "Lyon", "Metz"))]


class LengthEncoder:
    """A deterministic stand-in for a sentence encoder: a text's vector is its length."""

    name, fingerprint, backend = "length", "length-v1", "torch"

    def encode(self, texts):
        return torch.stack([torch.tensor([float(len(t)), 1.0, 0.5, 0.25]) for t in texts])


def test_health_reports_files_changed_in_place_while_the_loaded_version_answers(tmp_path, caplog):
    built = ISORAGIndex.build(PLACES, encoder=LengthEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    directory = built.save(tmp_path / "index")
    other = ISORAGIndex.build(PLACES[:2], encoder=LengthEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False).save(tmp_path / "other")
    index = ISORAGIndex.load(directory)
    index.encoder = LengthEncoder()
    truth = {p["id"]: (p["title"], p["text"]) for p in PLACES}
    with TestClient(create_app(index, ServerSettings(batch_window_ms=1)), base_url="http://localhost") as client:
        assert client.get("/health").json()["disk"] == {"state": "ok", "problems": []}
        (directory / "passages.jsonl").write_bytes(b"")
        shutil.copyfile(other / "tensors.safetensors", directory / "tensors.safetensors")  # cp other_idx/* served_idx/, in place
        with caplog.at_level(logging.WARNING, logger="isorag_pyg.server.reloading"):
            for _ in range(3):
                health = client.get("/health").json()
                assert health["status"] == "degraded" and health["disk"]["state"] == "changed"
                assert any(p.startswith("passages.jsonl: 0 bytes") for p in health["disk"]["problems"])
                assert any(p.startswith("tensors.safetensors:") for p in health["disk"]["problems"])
                answer = client.post("/retrieve", json={"questions": ["Metz is a place..."], "k": 4, "retriever": "dense"}).json()
                assert {r["id"]: (r["title"], r["text"]) for r in answer[0]["results"]} == truth  # the verified version, whole
        assert len([r for r in caplog.records if "no longer hold the served version" in r.getMessage()]) == 1
        built.save(directory)  # the normal path: a new version saved over the damaged one
        assert client.get("/health").json()["status"] == "stale"
        assert client.post("/reload", json={}).json()["reloaded"] is True
        assert client.get("/health").json()["status"] == "ok"


@pytest.mark.slow
def test_a_served_index_damaged_in_place_under_16_clients_keeps_serving_right_passages(tmp_path):
    directory = build(passages(40)).save(tmp_path / "index")
    other = build(passages(40, 200)).save(tmp_path / "other")
    ISORAGIndex.load(other).save(other)  # version 2: the watch tries to open the copied manifest's version
    truth = {p["id"]: (p["title"], p["text"]) for p in passages(40)}
    server = Server(directory, tmp_path / "serve.log", "--watch-seconds", "0.5").ready()
    wrong, failed, answered, stop = [], [], [0], threading.Event()

    def client(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            while not stop.is_set():
                record = passages(1, i * 2 % 40)[0]
                response = http.post("/retrieve", json={"questions": [record["text"]], "k": 3, "retriever": "dense" if i % 2 else "bm25"})
                if response.status_code != 200:
                    failed.append(response.text)
                    continue
                answered[0] += 1
                results = response.json()[0]["results"]
                wrong.extend(r for r in results if truth.get(r["id"]) != (r["title"], r["text"]))
                if record["id"] not in [r["id"] for r in results]:  # a passage asked for by its own text is found
                    wrong.append((record["id"], [r["id"] for r in results]))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(2)
        for damage in ("truncate", "replace", "edit"):
            if damage == "truncate":
                (directory / "passages.jsonl").write_bytes(b"")
            elif damage == "replace":
                shutil.copyfile(other / "tensors.safetensors", directory / "tensors.safetensors")  # cp other_idx/tensors... served_idx/
            else:
                with open(directory / "tensors.safetensors", "r+b") as handle:
                    handle.seek(200)
                    handle.write(b"\xff" * 64)
                shutil.copyfile(other / "manifest.json", directory / "manifest.json")  # a version 2 whose files are not there
            time.sleep(2)
            health = server.client.get("/health").json()
            assert health["status"] in ("degraded", "stale") and health["disk"]["problems"], (damage, health)
        stop.set()
        for thread in threads:
            thread.join()
        assert server.process.poll() is None and not failed and not wrong, (failed[:3], wrong[:3])
        assert answered[0] > 50
        assert "not reloaded" in server.log.read_text()  # the watch tried the copied manifest's version, refused it, kept serving
        rebuilt = isorag("index", str(write_jsonl(tmp_path / "corpus.jsonl", passages(41))), str(directory), "--graph", "title_mention",
                         "--quiet")
        assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
        deadline = time.monotonic() + 120
        while server.client.get("/health").json()["status"] != "ok" and time.monotonic() < deadline:
            time.sleep(0.5)  # the watch serves the rebuilt version
        assert server.client.get("/health").json()["passages"] == 41
    finally:
        stop.set()
        server.stop()
