"""A small OpenAI-compatible embeddings server on 127.0.0.1 with scripted failures."""
from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import numpy as np
from fake_http import FakeServer


def fake_vector(text: str, dim: int) -> list[float]:
    """The server's (unnormalised) embedding of ``text``: a fixed function of the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return (np.random.default_rng(seed).standard_normal(dim) * 3).tolist()


class FakeEmbeddings(FakeServer):
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
        super().__init__()

    def respond(self, body: dict[str, Any]) -> tuple[int, bytes]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with self.lock:
            self.inputs.append(texts)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            failure = self.failures.pop(0) if self.failures else next((self.fail_on[t] for t in texts if t in self.fail_on), None)
        try:
            time.sleep(self.latency)
            if failure == "timeout":
                time.sleep(self.delay)
            if failure == "500":
                return 500, json.dumps({"error": {"message": "internal error"}}).encode()
            vectors = [fake_vector(t, self.dim + (failure == "dim")) for t in texts]
            if failure == "short":
                vectors = vectors[:-1]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            data.reverse()  # servers may answer out of order: the client sorts by index
            return 200, json.dumps({"object": "list", "data": data, "model": body["model"],
                                    "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        finally:
            with self.lock:
                self.in_flight -= 1
