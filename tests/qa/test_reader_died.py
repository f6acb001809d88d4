"""A reader whose llama.cpp server dies says so (its exit code or the signal, with the likely cause),
fails at once instead of retrying a dead port, and starts the server again for the next question."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from isorag_pyg.qa import OpenAIChatGenerator
from isorag_pyg.qa.generators import GeneratorError, ReaderDied
from isorag_pyg.qa.llama_server import LlamaServer, free_port
from isorag_pyg.qa.reader_spec import ReaderSpec

SELF_SIGILL = "import os, signal; os.kill(os.getpid(), signal.SIGILL)"


def test_a_dead_server_process_is_described_by_its_exit_code_or_signal(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    server = LlamaServer(gguf, log_path=tmp_path / "server.log")
    assert server.exit_reason() is None  # never started
    server.process = subprocess.Popen([sys.executable, "-c", SELF_SIGILL])
    reason = server.exit_reason(wait=30)
    assert f"pid {server.process.pid}" in reason and "killed by SIGILL" in reason and "illegal instruction" in reason
    assert "AMX" in reason and "pip install --no-cache-dir" in reason and str(tmp_path / "server.log") in reason
    server.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert "exited with code 3" in server.exit_reason(wait=30)
    server.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert server.exit_reason(wait=0.1) is None  # alive: a slow server is not a dead one
    finally:
        server.process.kill()
        server.process.wait()


def test_a_request_to_a_dead_server_fails_at_once_with_the_reason():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: as after the server died
    asked = []

    def diagnose() -> str:
        asked.append(1)
        return "the llama.cpp server (pid 7) was killed by SIGILL"

    generator = OpenAIChatGenerator(url, "m", max_retries=3, backoff=5.0, diagnose=diagnose)
    with pytest.raises(ReaderDied, match=r"^the reader died: the llama.cpp server \(pid 7\) was killed by SIGILL$"):
        generator.generate(["Q: who?\nA:"])
    assert generator.calls == 1 and asked  # no retry of a dead port (the backoff would take 5 s and more)
    with pytest.raises(ReaderDied, match="killed by SIGILL"):
        list(generator.stream("Q: who?\nA:"))
    # without a diagnosis (a remote endpoint) it stays what it was: an unreachable generator
    with pytest.raises(GeneratorError, match="cannot reach the generator") as caught:
        list(OpenAIChatGenerator(url, "m", max_retries=0).stream("Q: who?\nA:"))
    assert not isinstance(caught.value, ReaderDied)


@pytest.mark.slow
def test_the_packaged_reader_reports_its_dead_server_and_starts_it_again(llama_server_installed, gemma_gguf):
    request = "Question: What is the capital of France?\nAnswer:"
    with ReaderSpec().make() as reader:
        first = reader.generate([request])[0]["answer"]
        server, generator = reader._server, reader.generator
        os.kill(server.process.pid, signal.SIGILL)  # what an AMX build does, mid-answer, on a VM that cannot run it
        server.process.wait(timeout=30)
        with pytest.raises(ReaderDied, match="killed by SIGILL.*illegal instruction"):
            generator.generate(["Question: What is the capital of Spain?\nAnswer:"])  # a request the server dies under
        assert reader.generate([request])[0]["answer"] == first  # started again: the same greedy answer
        assert reader._server is not server and reader._server.exit_reason() is None
