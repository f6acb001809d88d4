"""The passages of an index: held in memory after a build, read lazily from disk after a load."""
from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch
from torch import Tensor

from isorag_pyg.datasets.types import Passage


def write_passages(passages: Iterable[Passage], path: Path) -> Tensor:
    """Write one ``{"id", "title", "text"}`` JSON object a line; returns the ``[N + 1]`` byte offsets."""
    offsets = [0]
    with path.open("wb") as handle:
        for p in passages:
            line = (json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n").encode()
            handle.write(line)
            offsets.append(offsets[-1] + len(line))
    return torch.tensor(offsets, dtype=torch.int64)


class PassageStore(Sequence[Passage]):
    """Passages by corpus row: a list in memory, or a JSON-lines file read on demand through
    ``mmap`` with its byte ``offsets`` (a million passages open without parsing them). The file
    is mapped when the store is made (from ``read_from``, default ``path``; errors name
    ``path``); an index maps the private copy it verified (:mod:`~isorag_pyg.store.sealed`), so
    nothing done to ``path`` afterwards changes or breaks what this store reads."""

    def __init__(self, passages: list[Passage] | None = None, path: Path | None = None, offsets: Tensor | None = None,
                 read_from: Path | None = None):
        if (passages is None) == (path is None):
            raise ValueError("give either passages or a path with offsets")
        self._list = passages
        self._path, self._offsets = path, offsets
        self._map: mmap.mmap | None = None
        self._row_of: dict[str, int] | None = None
        if path is not None:
            if offsets is None or offsets.dim() != 1 or offsets.numel() < 1:
                raise ValueError(f"{path}: passage offsets missing or malformed")
            with (read_from or path).open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if int(offsets[-1]) != size:
                    raise ValueError(f"{path}: {size} bytes, but the offsets end at {int(offsets[-1])}")
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else self._offsets.numel() - 1

    def _line(self, row: int) -> Passage:
        assert self._map is not None  # offsets rise strictly: a row has bytes
        start, stop = int(self._offsets[row]), int(self._offsets[row + 1])
        try:
            record = json.loads(self._map[start:stop])
            return Passage(str(record["id"]), str(record["title"]), str(record["text"]))
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as err:
            raise ValueError(f"{self._path}: passage {row} is unreadable ({err})") from None

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if not -len(self) <= row < len(self):
            raise IndexError(f"passage row {row} out of range for {len(self)} passages")
        row %= len(self)
        return self._list[row] if self._list is not None else self._line(row)

    def __iter__(self) -> Iterator[Passage]:
        return (self[i] for i in range(len(self)))

    def row_of(self, passage_id: str) -> int | None:
        """The corpus row of a passage id (the map is built on first use)."""
        if self._row_of is None:
            self._row_of = {p.id: i for i, p in enumerate(self)}
        return self._row_of.get(passage_id)

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self]


def rows_of(passages: PassageStore, ids: Iterable[str], verb: str = "remove") -> Tensor:
    """The sorted distinct rows of passage ``ids`` (``verb`` names the caller in errors: a string
    instead of a list, no id, an unknown id)."""
    if isinstance(ids, str):
        raise TypeError(f"{verb}() takes a list of passage ids, got the string {ids!r} (write [{ids!r}])")
    ids = list(ids)
    if not ids:
        raise ValueError(f"{verb}() needs at least one passage id")
    rows = [passages.row_of(str(i)) for i in ids]
    if missing := [i for i, r in zip(ids, rows) if r is None]:
        raise ValueError(f"no passage with id {missing[0]!r} in the index" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return torch.tensor(sorted(set(rows)), dtype=torch.long)
