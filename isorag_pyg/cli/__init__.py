"""The ``isorag`` command: build, inspect, update, tune, query and serve an index of your own
corpus (``isorag index|query|info|add|remove|tune|serve``; ``isorag <command> --help`` gives the
options).

Errors (a bad path, an empty corpus, a missing or corrupt index, a bad argument such as ``-k abc``)
are one line on stderr and exit status 1; ``ISORAG_DEBUG=1`` shows the traceback instead.
``add``, ``remove`` and ``tune`` hold the index's writer lock from loading to saving, so
concurrent updates run one after the other.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from isorag_pyg.cli.build import run_index
from isorag_pyg.cli.parser import build_parser
from isorag_pyg.cli.read import run_info, run_query
from isorag_pyg.cli.serve import run_serve
from isorag_pyg.cli.update import run_add, run_quarantine, run_remove, run_tune


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``isorag`` command (``argv``, default: the process's arguments); the exit status."""
    args = build_parser().parse_args(argv)
    out = sys.stdout
    try:
        # libraries print notices to stdout (e.g. transformers under WANDB_MODE=offline): send
        # them to stderr, so stdout carries only the answer (and --json stays parseable)
        with contextlib.redirect_stdout(sys.stderr):
            commands = {"index": run_index, "query": run_query, "info": run_info, "add": run_add, "remove": run_remove, "tune": run_tune,
                        "quarantine": run_quarantine, "serve": run_serve}
            lines = commands[args.command](args)
        out.write("".join(f"{line}\n" for line in lines))
    except KeyboardInterrupt:
        print("isorag: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one line for the user; the traceback only when asked for
        if os.environ.get("ISORAG_DEBUG"):
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"isorag {args.command}: error: {message}", file=sys.stderr)
        return 1
    return 0
