"""Passage ids an index assigns: a counter that never repeats.

Passages given without ids are numbered ``"0"``, ``"1"``, ... at build time; the index keeps the
next number in its manifest (``next_id``) and moves it past every numeric id it is ever given,
so an id assigned by :meth:`~isorag_pyg.index.ISORAGIndex.add` never equals one that is or was in
the index (removed passages included). Concurrent writers cannot draw the same number either:
a save over an index that changed since it was loaded is refused (see
:mod:`~isorag_pyg.store.locking`). Indexes saved before the counter existed start it after the
largest numeric id they hold.
"""
from __future__ import annotations

from collections.abc import Iterable


def next_number(ids: Iterable[str], at_least: int = 0) -> int:
    """One past the largest id that is a plain non-negative integer, and at least ``at_least``.

    Example:
        >>> next_number(["0", "7", "p3", "12#1"], at_least=3)
        8
    """
    numbers = [int(i) for i in ids if i.isascii() and i.isdigit()]
    return max([at_least, *(n + 1 for n in numbers)])
