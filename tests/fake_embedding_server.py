"""A small OpenAI-compatible embeddings server on 127.0.0.1 with scripted failures."""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from typing_extensions import Self


def fake_vector(text: str, dim: int) -> list[float]:
    """The server's (unnormalised) embedding of ``text``: a fixed function of the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return (np.random.default_rng(seed).standard_normal(dim) * 3).tolist()


class FakeEmbeddings:
    """``failures`` are served in order, one per request, before real answers: ``"500"``,
    ``"timeout"`` (sleeps ``delay`` s), ``"short"`` (one vector fewer than texts), ``"dim"``
    (vectors one longer); ``fail_on`` maps a text to a failure served whenever a batch holds it.
    ``inputs`` records every request's texts; ``most_in_flight`` the most concurrent requests."""

    def __init__(self, dim: int = 16, failures: list[str] | None = None, fail_on: dict[str, str] | None = None,
                 delay: float = 2.0, latency: float = 0.0):
        self.dim, self.failures, self.fail_on = dim, list(failures or []), dict(fail_on or {})
        self.delay, self.latency = delay, latency
        self.inputs: list[list[str]] = []
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                with fake.lock:
                    fake.inputs.append(texts)
                    fake.in_flight += 1
                    fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
                    failure = fake.failures.pop(0) if fake.failures else next((fake.fail_on[t] for t in texts if t in fake.fail_on), None)
                try:
                    time.sleep(fake.latency)
                    if failure == "timeout":
                        time.sleep(fake.delay)
                    if failure == "500":
                        return self._send(500, json.dumps({"error": {"message": "internal error"}}).encode())
                    vectors = [fake_vector(t, fake.dim + (failure == "dim")) for t in texts]
                    if failure == "short":
                        vectors = vectors[:-1]
                    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
                    data.reverse()  # servers may answer out of order: the client sorts by index
                    self._send(200, json.dumps({"object": "list", "data": data, "model": body["model"],
                                                "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode())
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def _send(self, status: int, data: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
