"""The names of an index directory's files and the error that names a bad one (shared by the
modules that write, lock, open and check index directories)."""
from __future__ import annotations

from pathlib import Path

#: The on-disk layout this version writes and the newest it reads (2: ``entities.json`` holds
#: ``{"names", "unique_mentions"}``; version 1 held the names as a list, and still loads).
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
TENSORS, PASSAGES, F_THETA, ANN = "tensors.safetensors", "passages.jsonl", "f_theta.safetensors", "ann.safetensors"
ENTITIES = "entities.json"  # an entity graph's entity node names and unique mentions


class IndexFormatError(ValueError):
    """An index directory is missing, corrupt, tampered with or of a newer format; the message
    names the file."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
