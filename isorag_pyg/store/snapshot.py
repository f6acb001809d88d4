"""Open every file of one version of an index directory at once, so that a save by another
process (which swaps in a new directory and deletes the old one) never mixes two versions.

The directory is opened first and each file through it (``openat``); if a writer swapped the
directory meanwhile and deleted a file before it was opened, everything is opened again from the
new version. The open files are then read through ``/proc/self/fd`` (Linux): memory maps and the
passages file keep the version they opened for as long as the index lives.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from typing_extensions import Self

from isorag_pyg.store.layout import MANIFEST, IndexFormatError

_ATTEMPTS = 20
_PROC_FD = Path("/proc/self/fd")


class OpenedVersion:
    """The manifest and files of one version of ``directory``, opened together.

    ``path(name)`` is where to read file ``name`` of that version (errors still name
    ``directory / name``); ``keep(name)`` hands an open file object to the caller, which then
    owns it (e.g. for a file read on first use). Use as a context manager: the other
    descriptors are closed on exit.
    """

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self._fds: dict[str, int] = {}
        self.manifest_bytes = b""
        for attempt in range(_ATTEMPTS):
            try:
                self._open()
                return
            except _Swapped:
                self.close()
                time.sleep(0.01 * attempt)
        raise IndexFormatError(self.directory, f"changed {_ATTEMPTS} times while it was being opened; try again")

    def _open(self) -> None:
        if not self.directory.is_dir():
            raise IndexFormatError(self.directory, "no such index directory")
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.manifest_bytes = self._read(dir_fd, MANIFEST)
            for name in _listed_names(self.manifest_bytes):
                if name not in self._fds:
                    self._fds[name] = self._open_in(dir_fd, name)
        finally:
            os.close(dir_fd)

    def _read(self, dir_fd: int, name: str) -> bytes:
        fd = self._open_in(dir_fd, name)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def _open_in(self, dir_fd: int, name: str) -> int:
        try:
            return os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except FileNotFoundError:
            if os.fstat(dir_fd).st_ino != _inode(self.directory):
                raise _Swapped() from None
            if name == MANIFEST:
                raise IndexFormatError(self.directory / MANIFEST, "missing: not an isorag index directory") from None
            raise IndexFormatError(self.directory / name, "missing") from None
        except OSError as err:
            raise IndexFormatError(self.directory / name, f"cannot be opened ({err.strerror})") from None

    def path(self, name: str) -> Path:
        """Where to read ``name`` of the opened version."""
        if name == MANIFEST or name not in self._fds or not _PROC_FD.is_dir():
            return self.directory / name
        return _PROC_FD / str(self._fds[name])

    def keep(self, name: str) -> Any:
        """The open file ``name`` of this version as a binary file object the caller owns."""
        return os.fdopen(self._fds.pop(name), "rb")

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class _Swapped(Exception):
    """The directory was replaced while its files were being opened."""


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _listed_names(manifest_bytes: bytes) -> list[str]:
    """The plain file names a manifest lists (anything else is left to the manifest's checks)."""
    try:
        files = json.loads(manifest_bytes).get("files", {})
    except (ValueError, AttributeError):
        return []
    if not isinstance(files, dict):
        return []
    return [name for name in files if isinstance(name, str) and name and Path(name).name == name and name not in (".", "..")]
