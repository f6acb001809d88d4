"""The ``isorag`` command: build, inspect, update, tune, query, ask and serve an index of your own
corpus (``isorag index|query|ask|info|add|remove|tune|serve``), and look after the embedding cache
(``isorag cache info|clear``); ``isorag <command> --help`` gives the options.

Errors (a bad path, an empty corpus, a missing or corrupt index, a bad argument such as ``-k abc``)
are one line on stderr and exit status 1; ``ISORAG_DEBUG=1`` shows the traceback instead.
``add``, ``remove`` and ``tune`` hold the index's writer lock from loading to saving, so
concurrent updates run one after the other.

stdout carries the answer alone; stderr the progress (bars on a terminal, plain lines
elsewhere: :mod:`isorag_pyg.progress`) and the library's warnings as ``isorag: WARNING: ...``
lines (``-v`` adds INFO, ``-q`` keeps errors only).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence

from isorag_pyg.cli.ask import run_ask
from isorag_pyg.cli.build import run_index
from isorag_pyg.cli.cache import run_cache
from isorag_pyg.cli.parser import build_parser
from isorag_pyg.cli.read import run_info, run_query
from isorag_pyg.cli.serve import run_serve
from isorag_pyg.cli.update import run_add, run_quarantine, run_remove, run_tune


@contextlib.contextmanager
def _logs_to_stderr(quiet: bool, verbose: bool) -> Iterator[None]:
    """While a command runs: the library's logs and Python warnings as one line each on stderr,
    warnings and errors by default (``verbose``: INFO too; ``quiet``: errors only)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("isorag: %(levelname)s: %(message)s"))
    root, level = logging.getLogger(), logging.getLogger().level
    root.addHandler(handler)
    root.setLevel(min(level, handler.level))
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``isorag`` command (``argv``, default: the process's arguments); the exit status."""
    args = build_parser().parse_args(argv)
    out = sys.stdout
    try:
        # libraries print notices to stdout (e.g. transformers under WANDB_MODE=offline): send
        # them to stderr, so stdout carries only the answer (and --json stays parseable)
        with contextlib.redirect_stdout(sys.stderr), _logs_to_stderr(args.quiet, args.verbose):
            commands = {"index": run_index, "query": run_query, "ask": run_ask, "info": run_info, "add": run_add, "remove": run_remove,
                        "tune": run_tune, "quarantine": run_quarantine, "serve": run_serve, "cache": run_cache}
            lines = commands[args.command](args)
            if not isinstance(lines, list):  # a stream of text (isorag ask): written as it comes
                for chunk in lines:
                    out.write(chunk)
                    out.flush()
                lines = []
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
