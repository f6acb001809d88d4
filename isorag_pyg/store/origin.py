"""Where an index came from: the directory, the version saved there and, for each file, what was
read (size, digest, and the signature of the file on disk), so that a server can tell when the
files no longer hold the version it serves (:mod:`~isorag_pyg.store.disk_check`)."""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from isorag_pyg.store.layout import MANIFEST
from isorag_pyg.store.sealed import Signature, signature


class LoadedFile(NamedTuple):
    """One file of a loaded or saved version: its bytes, SHA-256 and the file's signature then."""

    bytes: int
    sha256: str
    source: Signature


class Origin(NamedTuple):
    """The directory an index was loaded from or saved to, the version (``generation``) there,
    and its files by name (the manifest included)."""

    directory: Path
    generation: int
    files: Mapping[str, LoadedFile] = {}


def saved_origin(directory: Path, generation: int) -> Origin:
    """The origin of an index just saved to ``directory`` (read while the writer still holds its
    lock): the manifest's record of each file, with the signature of the file written."""
    manifest_bytes = (directory / MANIFEST).read_bytes()
    files = {name: LoadedFile(entry["bytes"], entry["sha256"], signature(os.stat(directory / name)))
             for name, entry in json.loads(manifest_bytes)["files"].items()}
    files[MANIFEST] = LoadedFile(len(manifest_bytes), hashlib.sha256(manifest_bytes).hexdigest(), signature(os.stat(directory / MANIFEST)))
    return Origin(directory.resolve(), generation, files)
