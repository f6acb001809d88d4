"""`isorag ask` and `isorag serve` with the packaged Gemma reader, its default (slow tier): the
answer object from `ask --json`, `POST /answer` streamed from a real server, `ask --server`."""
from __future__ import annotations

import json

import pytest
from index_helpers import isorag
from test_server import Server

QUESTIONS = ["Which town is known for craft number 5?"]


@pytest.mark.slow
def test_ask_and_serve_answer_with_the_packaged_reader(llama_server_installed, gemma_gguf, saved, tmp_path):
    asked = isorag("ask", str(saved), QUESTIONS[0], "--json")
    assert asked.returncode == 0, asked.stderr[-2000:]
    result = json.loads(asked.stdout)
    assert result["answer"] and result["timings"]["reader_s"] > 0 and len(result["passages"]) == 5
    server = Server(saved, tmp_path / "serve.log").ready()
    try:
        events = []
        with server.client.stream("POST", "/answer", json={"question": QUESTIONS[0], "stream": True}, timeout=600) as response:
            events = [line.split(": ", 1)[1] for line in response.iter_lines() if line.startswith("event: ")]
        assert events[0] == "passages" and events[-1] == "done" and "token" in events
        remote = isorag("ask", str(saved), QUESTIONS[0], "--server", server.url)
        assert remote.returncode == 0 and remote.stdout.startswith(result["answer"]), remote.stderr[-2000:]
        assert server.client.get("/info").json()["reader"] == "gemma-3-270m"
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()
