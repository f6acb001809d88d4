"""A child started through isorag_pyg.qa.tied_process ends with its parent, however the parent ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from isorag_pyg.qa.tied_process import main

# a parent that starts a tied http.server, prints the child's pid and port, then waits to be killed
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-m", "isorag_pyg.qa.tied_process", str(os.getpid()), "http.server", "0", "--bind", "127.0.0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
print(child.pid, child.stdout.readline().strip(), flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an ended child nobody reaped yet)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" not in status.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False


def ends_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` stops running (:func:`running`) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not running(pid)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_tied_child_runs_its_module_while_the_parent_lives_and_ends_when_the_parent_is_killed(how):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        pid, *served = parent.stdout.readline().split(maxsplit=1)
        child = int(pid)
        assert served and served[0].startswith("Serving HTTP on 127.0.0.1 port")  # the module runs, with its arguments
        time.sleep(1.5)  # three checks of the parent
        assert running(child)
        os.kill(parent.pid, how)
        parent.wait(timeout=10)
        assert ends_within(child, 10), f"the tied child outlived its parent ({how.name})"
    finally:
        parent.kill()
        parent.wait()


def test_a_bad_command_line_says_how_to_call_it():
    for argv in ([], ["123"], ["abc", "http.server"]):
        with pytest.raises(SystemExit, match="usage: python -m isorag_pyg.qa.tied_process PARENT_PID MODULE"):
            main(argv)
    with pytest.raises(SystemExit, match=f"process {os.getpid()} is not this process's parent"):
        main([str(os.getpid()), "http.server"])  # a process is never its own parent: nothing runs untied


# a parent that starts the packaged reader's llama.cpp server, prints its pid, then waits to be killed
READER_PARENT = """
import sys, time
from isorag_pyg.qa.llama_server import LlamaServer
server = LlamaServer(sys.argv[1]).start()
print(server.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads process states from /proc (Linux)")
def test_the_llama_server_ends_when_the_process_that_started_it_is_killed(llama_server_installed, gemma_gguf):
    parent = subprocess.Popen([sys.executable, "-c", READER_PARENT, str(gemma_gguf)], stdout=subprocess.PIPE, text=True)
    try:
        server = int(parent.stdout.readline())  # printed once the server answers
        assert running(server)
        os.kill(parent.pid, signal.SIGKILL)  # no clean-up runs in the parent: only the tie ends the server
        parent.wait(timeout=10)
        assert ends_within(server, 15), "the llama.cpp server outlived the process that started it"
    finally:
        parent.kill()
        parent.wait()
