"""The embedding cache's files: where they are, how much they hold, and a bound on it.

Every embedding cached is one file ``emb-<key>.pt`` in the cache folder (``$ISORAG_CACHE_DIR``,
default ``~/.cache/isorag_pyg``); each build or add leaves one, so without a bound the folder
only grew. The files' modification time is the cache's clock (a file read is touched), and
after every write the least recently used files are removed until the folder's embeddings fit
in ``$ISORAG_CACHE_MAX_BYTES`` (default :data:`~isorag_pyg.defaults.EMBEDDING_CACHE_MAX_BYTES`).
No torch here: ``isorag cache info|clear`` stays light.
"""
from __future__ import annotations

import os
from pathlib import Path

from isorag_pyg import defaults

PATTERN = "emb-*.pt"


def default_cache_dir() -> Path:
    """``$ISORAG_CACHE_DIR`` or ``~/.cache/isorag_pyg``."""
    return Path(os.environ.get("ISORAG_CACHE_DIR", Path.home() / ".cache" / "isorag_pyg"))


def cache_limit() -> int:
    """The bytes the embedding cache may hold: ``$ISORAG_CACHE_MAX_BYTES`` (``0``: cache
    nothing), else the default; ``ValueError`` for anything but a non-negative integer."""
    value = os.environ.get("ISORAG_CACHE_MAX_BYTES")
    if value is None:
        return defaults.EMBEDDING_CACHE_MAX_BYTES
    if not value.strip().isdigit():
        raise ValueError(f"ISORAG_CACHE_MAX_BYTES must be a number of bytes, got {value!r}")
    return int(value)


def _entries(directory: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, path) of each cached embedding file, least recently used first."""
    found = []
    for path in directory.glob(PATTERN):
        try:
            info = path.stat()
        except FileNotFoundError:  # removed by another process meanwhile
            continue
        found.append((info.st_mtime, info.st_size, path))
    return sorted(found)


def usage(directory: Path) -> tuple[int, int]:
    """(files, bytes) of the embeddings cached in ``directory``."""
    entries = _entries(directory)
    return len(entries), sum(size for _, size, _ in entries)


def touch(path: Path) -> None:
    """Mark a cached file as just used."""
    try:
        os.utime(path)
    except OSError:
        pass


def trim(directory: Path, max_bytes: int) -> list[Path]:
    """Remove the least recently used embedding files until the rest hold at most ``max_bytes``; those removed."""
    entries = _entries(directory)
    total = sum(size for _, size, _ in entries)
    removed = []
    for _, size, path in entries:
        if total <= max_bytes:
            break
        path.unlink(missing_ok=True)
        total -= size
        removed.append(path)
    return removed


def clear(directory: Path) -> tuple[int, int]:
    """Remove every cached embedding file in ``directory``: (files, bytes) removed."""
    files, size = usage(directory)
    for _, _, path in _entries(directory):
        path.unlink(missing_ok=True)
    return files, size
