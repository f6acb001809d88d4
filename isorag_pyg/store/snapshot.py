"""Open every file of one version of an index directory at once, so that a save by another
process (which swaps in a new directory and deletes the old one) never mixes two versions.

The directory is opened first and each file through it (``openat``); if a writer swapped the
directory meanwhile and deleted a file before it was opened, everything is opened again from the
new version. Each file is then copied into private, sealed memory
(:class:`~isorag_pyg.store.sealed.SealedCopy`) and read from there: neither a save by another
process nor anyone editing, truncating or replacing the files in place changes what an opened
index reads. What was read is described by :meth:`OpenedVersion.origin`.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from typing_extensions import Self

from isorag_pyg.store.layout import MANIFEST, IndexFormatError
from isorag_pyg.store.origin import LoadedFile, Origin
from isorag_pyg.store.sealed import SealedCopy, signature
from isorag_pyg.utils.files import fd_sha256

_ATTEMPTS = 20
_PROC_FD = Path("/proc/self/fd")


class OpenedVersion:
    """The manifest and files of one version of ``directory``, opened together.

    ``copy(name)`` copies file ``name`` of that version into private memory (once; its size and
    digest are checked by the caller); ``path(name)`` is where to read it then (errors still name
    ``directory / name``); ``keep(name)`` hands the copy to the caller, which then owns it (e.g.
    for a file read on first use). Use as a context manager: the descriptors and copies not kept
    are closed on exit (maps and tensors made from a copy keep its memory).
    """

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self._fds: dict[str, int] = {}
        self._copies: dict[str, SealedCopy] = {}
        self._sources: dict[str, tuple[int, int, int, int]] = {}  # each file's signature when opened
        self.manifest_bytes = b""
        self.manifest_source = (0, 0, 0, 0)
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
                    self._sources[name] = signature(os.fstat(self._fds[name]))
        finally:
            os.close(dir_fd)

    def _read(self, dir_fd: int, name: str) -> bytes:
        fd = self._open_in(dir_fd, name)
        self.manifest_source = signature(os.fstat(fd))
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def _open_in(self, dir_fd: int, name: str) -> int:
        """``name`` opened in the directory: a regular file (not a link, a folder or a FIFO, whose
        open would block)."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            if os.fstat(dir_fd).st_ino != _inode(self.directory):
                raise _Swapped() from None
            if name == MANIFEST:
                raise IndexFormatError(self.directory / MANIFEST, "missing: not an isorag index directory") from None
            raise IndexFormatError(self.directory / name, "missing") from None
        except OSError as err:
            raise IndexFormatError(self.directory / name, f"cannot be opened ({err.strerror})") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise IndexFormatError(self.directory / name, "not a regular file")
        return fd

    def copy(self, name: str, digest: bool = True) -> SealedCopy | None:
        """File ``name`` of the opened version, copied into private memory (``digest``: with its
        SHA-256); ``None`` for a file the manifest does not list."""
        if name not in self._copies and name in self._fds:
            self._copies[name] = SealedCopy(self._fds[name], self.directory / name, digest)
        return self._copies.get(name)

    def digest(self, name: str) -> str:
        """The SHA-256 of file ``name`` of the opened version, read without copying it."""
        return fd_sha256(self._fds[name])

    def size(self, name: str) -> int | None:
        """The size of file ``name`` of the opened version (``None``: not listed)."""
        return self._sources[name][2] if name in self._sources else None

    def path(self, name: str) -> Path:
        """Where to read ``name`` of the opened version: its copy, once made."""
        if name in self._copies:
            return self._copies[name].path
        if name == MANIFEST or name not in self._fds or not _PROC_FD.is_dir():
            return self.directory / name
        return _PROC_FD / str(self._fds[name])

    def keep(self, name: str) -> Any:
        """The copy of ``name``, or the open file when not copied, as a binary file object the caller owns."""
        return self._copies.pop(name).handle if name in self._copies else os.fdopen(self._fds.pop(name), "rb")

    def origin(self, generation: int, files: dict[str, Any]) -> Origin:
        """What was read: the version ``generation`` of the directory, and for the manifest and
        each file its size and digest (the manifest's record ``files``) and the
        :func:`~isorag_pyg.store.sealed.signature` of the file when it was copied (or opened)."""
        loaded = {name: LoadedFile(files[name]["bytes"], files[name]["sha256"], self._copies[name].source if name in self._copies else source)
                  for name, source in self._sources.items() if name in files}
        loaded[MANIFEST] = LoadedFile(len(self.manifest_bytes), hashlib.sha256(self.manifest_bytes).hexdigest(), self.manifest_source)
        return Origin(self.directory.resolve(), generation, loaded)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        for copy in self._copies.values():
            copy.close()
        self._fds, self._copies, self._sources = {}, {}, {}

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
