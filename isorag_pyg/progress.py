"""Progress as a reader of it wants it: tqdm's bars on a terminal; on a pipe or in a file (``isorag
index CORPUS OUT 2> log``), plain one-line records, with no carriage return or escape code.

:func:`progress` is the package's one way to show progress (index stages, encoding, reading
answers); :func:`interactive` tells the libraries that draw their own bars (sentence-transformers,
transformers, Lightning) whether they may.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

if TYPE_CHECKING:
    from tqdm import tqdm

#: Seconds between two records of a count that is still running (stage changes are always written).
RECORD_INTERVAL_S = 10.0


def interactive() -> bool:
    """Whether stderr is a terminal (or a notebook's output), where bars redraw in place."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


class LineProgress:
    """What the package uses of tqdm (``update``, ``set_postfix_str``, iteration, ``close``, a
    context manager), written as lines to stderr: ``index: graph (2/4, 36.1 s)`` when the stage
    changes, the count at most every :data:`RECORD_INTERVAL_S` seconds, and ``done`` at the end."""

    def __init__(self, iterable: Iterable[Any] | None = None, total: int | None = None, desc: str = ""):
        self.iterable, self.total, self.desc = iterable, total, desc
        self.n, self.postfix = 0, ""
        self.start = self.last = time.monotonic()
        self.closed = False

    def _write(self, what: str) -> None:
        count = f"{self.n}/{self.total}" if self.total is not None else str(self.n)
        self.last = time.monotonic()
        print(f"{self.desc}: {what} ({count}, {self.last - self.start:.1f} s)", file=sys.stderr, flush=True)

    def set_postfix_str(self, postfix: str, refresh: bool = True) -> None:
        if postfix != self.postfix:
            self.postfix = postfix
            self._write(postfix)

    def update(self, n: int = 1) -> None:
        self.n += n
        if (self.total is None or self.n < self.total) and time.monotonic() - self.last >= RECORD_INTERVAL_S:
            self._write(self.postfix or "running")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._write("done")

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable or ():
            yield item
            self.update()
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(iterable: Iterable[Any] | None = None, total: int | None = None, desc: str = "", enabled: bool = True) -> tqdm | LineProgress:
    """A progress display over ``iterable`` or a count to ``total``: tqdm's bar (``leave=False``)
    where :func:`interactive`, :class:`LineProgress` elsewhere, a disabled tqdm (nothing shown)
    unless ``enabled``."""
    if enabled and not interactive():
        return LineProgress(iterable, total, desc)
    from tqdm.auto import tqdm as bar

    return bar(iterable, total=total, desc=desc, disable=not enabled, leave=False)
