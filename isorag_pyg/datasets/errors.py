"""The one error type every loader raises on malformed input."""
from __future__ import annotations

from pathlib import Path


class DatasetFormatError(ValueError):
    """A dataset file is malformed; the message names file, record and field."""

    def __init__(self, path: str | Path, problem: str, record: int | None = None, field: str | None = None):
        where = [str(path)]
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(": ".join(where) + f": {problem}")
        self.path, self.record, self.field = str(path), record, field
