"""A server that follows its index, watches its manifest, cuts off slow clients; the soak
benchmark's smoke run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from index_helpers import isorag, passages, rewrite, write_jsonl
from safetensors.torch import load_file
from test_server import Server

from isorag_pyg import ISORAGIndex
from isorag_pyg.index import IndexFormatError
from isorag_pyg.server.engine import RetrievalEngine
from isorag_pyg.server.reloading import ServedIndex


@pytest.mark.slow
def test_the_server_follows_its_index_without_a_failed_request(copy, tmp_path):
    server = Server(copy, tmp_path / "serve.log", "--batch-window-ms", "5").ready()
    try:
        info = server.client.get("/info").json()
        assert (info["version"], info["passages"]) == (ISORAGIndex.load(copy).generation, 20)
        assert server.client.post("/reload", json={}).json() == {"reloaded": False, "version": info["version"], "passages": 20}
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
        reloaded = server.client.post("/reload", json={}).json()
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
        refused = server.client.post("/reload", json={})
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
def test_slow_and_idle_clients_are_cut_off_and_never_starve_requests(copy, tmp_path):
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
        holders = [socket.create_connection((host, int(port)), timeout=10) for _ in range(6)]
        try:
            for holder in holders[:3]:
                holder.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")  # headers never finished; the others send nothing
            time.sleep(0.3)
            for _ in range(3):
                with httpx.Client(base_url=server.url, timeout=10) as fresh:  # a new connection each: it makes room for itself
                    assert fresh.get("/health").status_code == 200
        finally:
            for holder in holders:
                holder.close()
        connections = server.client.get("/health").json()["connections"]
        assert connections["evicted"] >= 3 and connections["refused"] == 0, connections
    finally:
        server.stop()

@pytest.mark.slow
def test_soak_smoke_run(tmp_path):
    """benchmarks.soak in seconds: clients, adds by another process, reloads; nothing failed, wrong or lost."""
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.soak", "--corpus", "synthetic", "--limit", "200", "--duration", "30",
                           "--clients", "4", "--add-every", "8", "--add-fraction", "0.02", "--window", "4", "--warm-up", "4",
                           "--plot", str(tmp_path / "soak.png")], check=False, capture_output=True, text=True, timeout=900, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "soak.json").read_text())
    assert result["totals"]["requests"] > 20 and len(result["adds"]) >= 1  # adds that start after the end are skipped
    assert result["totals"]["failures"] == result["totals"]["wrong"] == result["totals"]["lost"] == 0, result["examples"]
    assert result["served_passages"] == result["base_passages"] + len(result["adds"]) * result["per_add"]
    assert result["served_version"] == result["adds"][-1]["version"] and (tmp_path / "soak.png").stat().st_size > 0
