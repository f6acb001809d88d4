"""`isorag query` answers as the library does while importing only what it uses: the index's
tensors, the exported ONNX encoder with `tokenizers` (after `isorag index` exported it), or a
running server of the same index (`--server`); every `--help` imports nothing heavy."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from index_helpers import HEAVY_PACKAGES, isorag, isorag_imports, write_jsonl
from typing_extensions import Self

from isorag_pyg import ISORAGIndex
from isorag_pyg.cli.parser import build_parser
from isorag_pyg.index.results import answer_json

QUESTIONS = ["Which town is known for craft number 5?", "How far is Kostrov 1 from Aldania 2?", "What is Velmora 0 known for?"]
COMMANDS = ["index", "query", "ask", "info", "add", "remove", "quarantine", "tune", "serve", "cache"]


def test_every_help_imports_nothing_heavy():
    assert sorted(build_parser()._subparsers._group_actions[0].choices) == sorted(COMMANDS)  # every command
    for args in ([], *([command] for command in COMMANDS)):
        done, packages = isorag_imports(*args, "--help")
        assert done.returncode == 0 and "usage: isorag" in done.stdout, done.stderr
        assert packages & (HEAVY_PACKAGES | {"torch", "numpy", "onnxruntime", "tokenizers"}) == set(), args


def test_info_reads_the_index_without_anything_heavy(copy):
    done, packages = isorag_imports("info", str(copy))
    assert done.returncode == 0 and json.loads(done.stdout)["counts"]["passages"] == 20, done.stderr
    assert packages & HEAVY_PACKAGES == set()


class FakeServer:
    """`isorag serve`'s GET /info and POST /retrieve, answered from given JSON (``answers`` lists each request)."""

    def __init__(self, info: dict, answers: list) -> None:
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, info)

            def do_POST(self):
                fake.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self._send(200, answers) if answers else self._send(422, {"detail": "k must lie between 1 and 100, got 500"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_query_through_a_server_prints_its_answers_after_checking_it_serves_this_version(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    index = ISORAGIndex.load(copy)
    answers = [answer_json(q, hits) for q, hits in zip(QUESTIONS[:2], index.retrieve(QUESTIONS[:2], k=2))]
    info = {"version": manifest["generation"], "index": {"corpus_hash": manifest["corpus_hash"], "encoder": manifest["encoder"]}}
    with FakeServer(info, answers) as server:
        done, packages = isorag_imports("query", str(copy), *QUESTIONS[:2], "-k", "2", "--server", server.url, "--json")
        assert done.returncode == 0, done.stderr
        assert [json.loads(line) for line in done.stdout.splitlines()] == answers
        assert server.requests == [{"questions": QUESTIONS[:2], "k": 2, "retriever": "iso"}]
        assert "torch" not in packages and packages & HEAVY_PACKAGES == set()  # nothing of the retrieval stack
        plain = isorag("query", str(copy), *QUESTIONS[:2], "-k", "2", "--server", server.url)
        assert plain.stdout.startswith(f"Q: {QUESTIONS[0]}\n  1. [{answers[0]['results'][0]['score']:.3f}]")
    with FakeServer({**info, "version": manifest["generation"] - 1}, answers) as server:
        done = isorag("query", str(copy), "q", "--server", server.url)
        assert done.returncode == 1 and f"serves version {manifest['generation'] - 1}" in done.stderr and "POST /reload" in done.stderr
    with FakeServer({**info, "index": {**info["index"], "corpus_hash": "other"}}, answers) as server:
        done = isorag("query", str(copy), "q", "--server", server.url)
        assert done.returncode == 1 and "serves another index" in done.stderr
    with FakeServer(info, []) as server:  # the server's own refusal, as one line
        done = isorag("query", str(copy), "q", "-k", "500", "--server", server.url)
        assert done.returncode == 1 and done.stderr.strip().endswith("answered 422: k must lie between 1 and 100, got 500")
    done = isorag("query", str(copy), "q", "--server", "http://127.0.0.1:9")
    assert done.returncode == 1 and "cannot reach a server at http://127.0.0.1:9/info" in done.stderr


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("onnx")
def test_query_encodes_with_the_exported_onnx_model_and_ranks_as_the_library(tmp_path):
    from index_helpers import passages

    corpus = write_jsonl(tmp_path / "corpus.jsonl", passages(40))
    built = isorag("index", str(corpus), str(tmp_path / "index"), "--quiet")  # exports the encoder, once per machine
    assert built.returncode == 0, built.stderr
    library = ISORAGIndex.load(tmp_path / "index")  # questions through sentence-transformers on torch, as before
    for retriever in ("iso", "dense", "ppr"):
        done, packages = isorag_imports("query", str(tmp_path / "index"), *QUESTIONS, "-k", "5", "--retriever", retriever, "--json", "--timings")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stderr.strip().splitlines()[-1])["encoder"] == "ExportedEncoder (onnx)"
        assert packages & HEAVY_PACKAGES == set() and {"onnxruntime", "tokenizers"} <= packages
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        expected = library.retrieve(QUESTIONS, k=5, retriever=retriever)
        assert [[r["id"] for r in answer["results"]] for answer in answers] == [[h.id for h in hits] for hits in expected], retriever
        for answer, hits in zip(answers, expected):
            assert [r["score"] for r in answer["results"]] == pytest.approx([h.score for h in hits], abs=1e-4)


@pytest.mark.slow
def test_query_through_the_real_server_prints_what_a_local_query_prints(copy, tmp_path):
    import os
    import re
    import subprocess
    import sys
    import time

    log = tmp_path / "serve.log"
    with open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "serve", str(copy), "--port", "0"], stdout=subprocess.DEVNULL,
                                   stderr=stderr, env={k: v for k, v in os.environ.items() if k != "ISORAG_DEBUG"})
    try:
        deadline = time.monotonic() + 240
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        remote = isorag("query", str(copy), *QUESTIONS, "-k", "3", "--server", found.group(1))
        local = isorag("query", str(copy), *QUESTIONS, "-k", "3")
        assert remote.returncode == local.returncode == 0, remote.stderr + local.stderr
        assert remote.stdout == local.stdout
    finally:
        process.terminate()
        process.wait(30)


def test_the_query_path_is_documented_with_what_it_needs():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "index.md").read_text()
    assert "open_index" in docs and "isorag_pyg[onnx]" in docs and "--server" in docs
