"""Small helpers on files."""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def fd_sha256(fd: int) -> str:
    """The SHA-256 of an open file's bytes (read from its start, in 4 MiB blocks; its offset unchanged)."""
    digest, offset = hashlib.sha256(), 0
    while block := os.pread(fd, 1 << 22, offset):
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def process_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (``/proc/self/status``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, but brief)
    os.umask(mask)
    return mask


def apply_umask(path: Path) -> None:
    """Give a file the mode a plain ``open`` would (``0o666`` less the umask), e.g. after a
    library wrote it ``0o600`` through a temporary file."""
    os.chmod(path, 0o666 & ~process_umask())


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder (created if missing) and a
    rename: a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        apply_umask(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
