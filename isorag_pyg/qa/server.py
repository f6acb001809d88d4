"""llama-cpp-python's OpenAI-compatible server for a GGUF file, as a process on 127.0.0.1.

    with LlamaServer(packaged_gemma()) as server:
        OpenAIChatGenerator(server.base_url, server.model, ...)

Needs ``llama-cpp-python[server]`` (source-only on PyPI: ``.ci/run`` builds its wheel once into
the wheel cache). The server's output goes to ``log_path`` (default: a temporary file).
"""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


class ServerError(RuntimeError):
    """The server did not start, or is not installed."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """Starts ``python -m llama_cpp.server`` on a free port of 127.0.0.1 and waits until it
    answers ``/v1/models``; :meth:`stop` (or leaving the ``with`` block) ends it.

    ``threads`` defaults to one: llama.cpp's threads spin at barriers, and on a shared, busy
    machine two of them ran 3-5 times slower than one (measured here); raise it on a machine of
    your own. The server keeps the KV cache of the previous prompt, so a shared prefix (the
    few-shot examples) is computed once."""

    def __init__(self, model_path: str | Path, alias: str = "local-gguf", n_ctx: int = 4096, threads: int = 1,
                 startup_timeout: float = 120.0, log_path: str | Path | None = None, embedding: bool = False):
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ServerError(f"no GGUF file at {self.model_path}")
        self.model, self.n_ctx, self.threads, self.startup_timeout = alias, n_ctx, threads, startup_timeout
        self.embedding = embedding  # serve /v1/embeddings (the model's pooled hidden states) instead of completions
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LlamaServer":
        try:
            import llama_cpp.server  # noqa: F401 - only checks that it is installed
        except ImportError as err:
            raise ServerError("llama-cpp-python[server] is not installed (.ci/run builds and caches its wheel)") from err
        self.port = free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path), "--model_alias", self.model,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
               "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)] + (["--embedding", "true"] if self.embedding else [])
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"llama_cpp.server exited with code {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise ServerError(f"llama_cpp.server did not answer within {self.startup_timeout:.0f}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
