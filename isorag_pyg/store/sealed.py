"""A private, unchangeable copy of a file an index was opened from.

Mapping an index's files (``mmap``, safetensors' ``load_file``) left a loaded index at the mercy
of anyone who changed those files in place: truncating ``passages.jsonl`` or copying another
index's files over them killed a server with ``SIGBUS`` at its next read, and a byte edited
after the checksums were verified was served unverified. So each file is copied, once, into
memory this process alone holds (a Linux ``memfd``, sealed against any write, shrink or growth;
elsewhere an unlinked temporary file), its SHA-256 taken over exactly the bytes copied, and
everything is read from the copy: what is checked is what is served, whatever happens to the
file afterwards. The copy's pages are freed with the last reader (an open descriptor or map).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from isorag_pyg.store.layout import IndexFormatError

_BLOCK = 1 << 22
#: (device, inode, size, modification time): what a file's ``stat`` says about its identity and content.
Signature = tuple[int, int, int, int]


def signature(info: os.stat_result) -> Signature:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


class SealedCopy:
    """The bytes of the open file ``fd`` (named ``shown`` in errors), copied into private memory
    and sealed; ``sha256`` is their digest (``None`` unless ``digest``), ``source`` the file's
    :func:`signature` when copied. :class:`IndexFormatError` when the file changed during the copy."""

    def __init__(self, fd: int, shown: Path, digest: bool = True):
        before = signature(os.fstat(fd))
        self.handle = _private_file(shown.name)
        hasher = hashlib.sha256() if digest else None
        offset = 0
        while block := os.pread(fd, _BLOCK, offset):
            if hasher is not None:
                hasher.update(block)
            self.handle.write(block)
            offset += len(block)
        self.handle.flush()
        if signature(os.fstat(fd)) != before or offset != before[2]:
            self.handle.close()
            raise IndexFormatError(shown, "changed while it was being read; open the index again")
        _seal(self.handle.fileno())
        self.size, self.sha256, self.source = offset, None if hasher is None else hasher.hexdigest(), before

    @property
    def path(self) -> Path:
        """A path that opens the copy (as long as :attr:`handle` is open)."""
        return Path(f"/proc/self/fd/{self.handle.fileno()}" if Path("/proc/self/fd").is_dir() else f"/dev/fd/{self.handle.fileno()}")

    def close(self) -> None:
        self.handle.close()


def _private_file(name: str) -> Any:
    """A binary file object on memory nobody else can open: a sealable ``memfd``, else an
    unlinked temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(f"isorag:{name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        return os.fdopen(fd, "w+b")
    return tempfile.TemporaryFile()


def _seal(fd: int) -> None:
    """No more writes, shrinking or growth (where the system has seals)."""
    seals = ("F_SEAL_SEAL", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_WRITE")
    if hasattr(fcntl, "F_ADD_SEALS") and all(hasattr(fcntl, seal) for seal in seals):
        flags = 0
        for seal in seals:
            flags |= getattr(fcntl, seal)
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, flags)
        except OSError:  # a temporary file, not a memfd
            pass
