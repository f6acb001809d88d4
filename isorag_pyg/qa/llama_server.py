"""llama-cpp-python's OpenAI-compatible server for a GGUF file, as a process on 127.0.0.1.

    with LlamaServer(packaged_gemma()) as server:
        OpenAIChatGenerator(server.base_url, server.model, ...)

Needs ``llama-cpp-python[server]`` (source-only on PyPI: ``.ci/run`` builds its wheel once into
the wheel cache). The server's output goes to ``log_path`` (default: a temporary file).
"""
from __future__ import annotations

import importlib.metadata
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from typing_extensions import Self


class ServerError(RuntimeError):
    """The server did not start, or is not installed."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ReaderSettings:
    """How llama-cpp-python's server runs the model (defaults chosen by the project's reader-speed
    benchmark, measured side by side on the same prompts, with the same greedy answers).

    ``threads``: llama.cpp threads for the prompt and for generation (default: every core: on
    a 2-core machine otherwise idle, two threads processed prompts 1.7x as fast as one; on a
    machine shared with other busy processes its threads spin at barriers and one can be faster,
    so give a shared machine fewer, or run several one-thread servers). ``logits_all``: the
    server's own default, ``True``, computes the logits of the whole vocabulary (262k words
    for Gemma 3) for every prompt token, which only ``logprobs`` needs; ``False`` computes the
    last token's only. ``n_batch`` / ``n_ubatch``: prompt tokens per logical / physical batch.
    ``prompt_cache``: llama-cpp-python's RAM cache of whole model states by prompt prefix (the
    server always reuses the KV cache of the previous prompt, so a shared few-shot prefix is
    computed once even without it)."""

    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    logits_all: bool = False
    n_batch: int = 512
    n_ubatch: int = 512
    prompt_cache: bool = False

    def __post_init__(self) -> None:
        if min(self.threads, self.n_batch, self.n_ubatch) < 1:
            raise ValueError(f"threads, n_batch and n_ubatch must be >= 1: {self}")

    def args(self) -> list[str]:
        """The server's command-line flags for these settings."""
        return ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--logits_all", str(self.logits_all),
                "--n_batch", str(self.n_batch), "--n_ubatch", str(self.n_ubatch), "--cache", str(self.prompt_cache)]


#: The settings the project started the server with before the reader was tuned: llama-cpp-python's
#: defaults (logits for every prompt token, batches of 512) on one thread.
LEGACY_SETTINGS = ReaderSettings(threads=1, logits_all=True)


@dataclass(frozen=True)
class Timing:
    """llama.cpp's own account of one completion: prompt tokens it evaluated (those after the
    prefix reused from the previous prompt) and generated tokens, with their milliseconds."""

    prompt_tokens: int
    prompt_ms: float
    generated_tokens: int
    generation_ms: float


_PROMPT_LINE = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL_LINE = re.compile(r"(?<!prompt )eval time =\s*([\d.]+) ms /\s*(\d+) runs")


def parse_timings(log: str) -> list[Timing]:
    """Every completion's :class:`Timing` in a server log, in order (llama.cpp prints a
    ``llama_perf_context_print`` block after each completion when the server is verbose)."""
    prompts, evals = _PROMPT_LINE.findall(log), _EVAL_LINE.findall(log)
    if len(prompts) != len(evals):
        raise ValueError(f"unmatched llama.cpp timing lines: {len(prompts)} prompt, {len(evals)} generation")
    return [Timing(int(pn), float(pms), int(gn), float(gms)) for (pms, pn), (gms, gn) in zip(prompts, evals)]


def exit_words(code: int) -> str:
    """A process's exit status in words: ``exited with code N``, or ``was killed by SIGNAME``
    (a negative ``Popen.returncode``) with what the signal usually means here (:func:`signal_cause`).

        >>> exit_words(1)
        'exited with code 1'
        >>> exit_words(-9)
        'was killed by SIGKILL (out of memory, or killed by hand)'
    """
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name}{signal_cause(name)}"


def signal_cause(name: str) -> str:
    """What signal ``name`` usually means when it kills llama.cpp's server, in words (empty when
    nothing is known); for ``SIGILL``, the command that rebuilds the installed llama-cpp-python
    without the CPU features a virtual machine reports but cannot run."""
    if name == "SIGILL":
        try:
            pin = "==" + importlib.metadata.version("llama-cpp-python")
        except importlib.metadata.PackageNotFoundError:
            pin = ""
        return (" (an illegal instruction: llama-cpp-python was built for CPU features this machine reports but cannot run, "
                "such as AMX on some virtual machines; rebuild it without them: CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON "
                "-DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF' pip install --no-cache-dir --force-reinstall "
                f"--no-deps llama-cpp-python{pin})")
    return {"SIGKILL": " (out of memory, or killed by hand)", "SIGSEGV": " (a crash in llama.cpp)"}.get(name, "")


class LlamaServer:
    """Starts ``python -m llama_cpp.server`` on a free port of 127.0.0.1 and waits until it
    answers ``/v1/models``; :meth:`stop` (or leaving the ``with`` block) ends it, and so does the
    end of this process, however it ends (:mod:`~isorag_pyg.qa.tied_process`). ``settings``:
    threads, logits and batch sizes (:class:`ReaderSettings`). The server keeps the KV cache of
    the previous prompt, so a shared prefix (the few-shot examples) is computed once;
    :meth:`timings` reads llama.cpp's prompt and generation times of every completion so far."""

    def __init__(self, model_path: str | Path, alias: str = "local-gguf", n_ctx: int = 4096, settings: ReaderSettings = ReaderSettings(),
                 startup_timeout: float = 120.0, log_path: str | Path | None = None,
                 embedding: bool = False):
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ServerError(f"no GGUF file at {self.model_path}")
        self.model, self.n_ctx, self.settings, self.startup_timeout = alias, n_ctx, settings, startup_timeout
        self.embedding = embedding  # serve /v1/embeddings (the model's pooled hidden states) instead of completions
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        try:
            import llama_cpp.server  # noqa: F401 - only checks that it is installed
        except ImportError as err:
            raise ServerError("llama-cpp-python[server] is not installed (.ci/run builds and caches its wheel)") from err
        self.port = free_port()
        # tied to this process: the server ends when this process does, however it ends
        cmd = [sys.executable, "-m", "isorag_pyg.qa.tied_process", str(os.getpid()), "llama_cpp.server", "--model", str(self.model_path), "--model_alias", self.model,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx), *self.settings.args()] + (["--embedding", "true"] if self.embedding else [])
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

    def exit_reason(self, wait: float = 0.0) -> str | None:
        """Why the server's process is gone, in words (``None`` while it runs, after waiting up to
        ``wait`` s for it to end, or before it started): its exit code, or the signal that killed
        it (``SIGILL`` with the likely cause)."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(timeout=wait) if wait > 0 else self.process.poll()
        except subprocess.TimeoutExpired:
            return None
        if code is None:
            return None
        return f"the llama.cpp server (pid {self.process.pid}) {exit_words(code)}; its log: {self.log_path}"

    def timings(self) -> list[Timing]:
        """llama.cpp's :class:`Timing` of every completion this server has answered, in order."""
        return parse_timings(self.log_path.read_text(errors="replace"))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
