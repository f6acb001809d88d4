"""A module run as a child process that ends with the process that started it.

``python -m isorag_pyg.qa.tied_process PARENT_PID MODULE [ARGS ...]`` runs ``MODULE`` as
``python -m MODULE ARGS`` would, and ends it at once when process ``PARENT_PID`` is no longer its
parent: the parent exited or was killed, by any signal (``SIGKILL`` and the OOM killer included),
and the child was handed to another process. :class:`~isorag_pyg.qa.llama_server.LlamaServer`
starts llama.cpp's server this way, so no server outlives a killed ``isorag ask`` or ``isorag serve``.
"""
from __future__ import annotations

import os
import runpy
import sys
import threading
import time

#: Seconds between two checks of the parent.
POLL_S = 0.5
USAGE = "usage: python -m isorag_pyg.qa.tied_process PARENT_PID MODULE [ARGS ...]"


def end_with_parent(parent: int, poll_s: float = POLL_S) -> None:
    """Wait until process ``parent`` is no longer this process's parent, then end this process
    at once (no clean-up: nobody is left to read its result)."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    os._exit(0)


def main(argv: list[str]) -> None:
    """Watch the parent in a daemon thread and run the module in this one."""
    if len(argv) < 2 or not argv[0].isdigit():
        raise SystemExit(USAGE)
    parent, module = int(argv[0]), argv[1]
    if os.getppid() != parent:
        raise SystemExit(f"process {parent} is not this process's parent (it ended already, or the pid is wrong)")
    threading.Thread(target=end_with_parent, args=(parent,), name="end-with-parent", daemon=True).start()
    sys.argv = [module, *argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
