"""Whether an index directory still holds the version an index was loaded from.

A loaded index reads private copies of its files (:mod:`~isorag_pyg.store.sealed`), so a file
edited, truncated or replaced in place no longer harms it; but whoever runs it should hear that
the files on disk are no longer what it serves. :class:`DiskCheck` compares each file's
``stat`` (device, inode, size, modification time) with the one recorded when the version was
read; a file whose ``stat`` changed at the same size is hashed again (once per change) and
counts as changed only if its bytes differ. A manifest of another version (a normal save) makes
the index *stale*; anything else that differs makes it *changed*.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass

from isorag_pyg.store.directory import _manifest_digest
from isorag_pyg.store.layout import MANIFEST
from isorag_pyg.store.origin import Origin
from isorag_pyg.store.sealed import Signature, signature
from isorag_pyg.utils.files import file_sha256


@dataclass(frozen=True)
class DiskState:
    """``state``: ``"ok"`` (the files hold the loaded version), ``"stale"`` (another version was
    saved there) or ``"changed"`` (files edited, truncated, replaced or removed in place); and a
    one-line ``problems`` entry per file that differs."""

    state: str
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"state": self.state, "problems": list(self.problems)}


class DiskCheck:
    """Compares the directory of ``origin`` with the files read from it (see the module)."""

    def __init__(self, origin: Origin):
        self.origin = origin
        self._seen: dict[str, tuple[Signature, bool]] = {name: (loaded.source, True) for name, loaded in origin.files.items()}

    def state(self) -> DiskState:
        """The directory's state now (``stat`` calls; a hash only for a file changed at the same size)."""
        problems = [problem for name in self.origin.files if (problem := self._problem(name)) is not None]
        if not problems:
            return DiskState("ok")
        saved = self._saved_generation()
        if saved is not None and saved != self.origin.generation:
            return DiskState("stale", (f"version {saved} was saved there; this index is version {self.origin.generation}",))
        return DiskState("changed", tuple(problems))

    def _problem(self, name: str) -> str | None:
        loaded, path = self.origin.files[name], self.origin.directory / name
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            return f"{name}: missing"
        now = signature(info)
        seen, matched = self._seen[name]
        if now != seen:  # a regular file only: opening a FIFO put there would block
            matched = stat.S_ISREG(info.st_mode) and now[2] == loaded.bytes and _digest(path) == loaded.sha256
            self._seen[name] = (now, matched)
        if matched:
            return None
        if now[2] != loaded.bytes:
            return f"{name}: {now[2]} bytes, the loaded version's {loaded.bytes} (truncated or replaced)"
        return f"{name}: its bytes differ from the loaded version's (edited or replaced)"

    def _saved_generation(self) -> int | None:
        """The version the manifest on disk names (``None``: unreadable, or not as a writer left
        it: its own checksum does not match)."""
        try:
            manifest = json.loads((self.origin.directory / MANIFEST).read_bytes())
            intact = manifest.get("manifest_sha256") == _manifest_digest(manifest)
        except (OSError, ValueError, AttributeError, TypeError):
            return None
        generation = manifest.get("generation")
        return generation if intact and isinstance(generation, int) and not isinstance(generation, bool) else None


def _digest(path: os.PathLike) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None
