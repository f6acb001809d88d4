"""One writer at a time per index directory, and no debris from writers that died.

Writers take an exclusive OS file lock (``fcntl.flock``) on ``.<NAME>.lock`` beside the index
directory ``NAME`` (beside, not inside: the directory itself is swapped on every save). A second
writer waits up to a timeout, then fails with :class:`IndexLockTimeout`. The lock is reentrant
within a process, so ``isorag add`` can hold it from load to save while ``save`` takes it again.
A writer that died (``kill -9``) leaves its lock released by the kernel and, at worst, a temporary
folder ``.<NAME>.tmp-<PID>-<HEX>``: the next writer holding the lock removes those whose process
is gone (:func:`remove_debris`).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from isorag_pyg import defaults
from isorag_pyg.store.layout import MANIFEST, IndexFormatError

_POLL_S = 0.05


class IndexLockTimeout(TimeoutError):
    """Another writer held the index's lock for longer than the timeout."""


class StaleIndexError(RuntimeError):
    """The index on disk changed since this copy was loaded: saving would drop another writer's work."""


def lock_path(directory: str | Path) -> Path:
    """The lock file of an index directory: ``.<NAME>.lock`` beside it."""
    directory = Path(directory).absolute()
    return directory.parent / f".{directory.name}.lock"


class _Held:
    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_held: dict[Path, _Held] = {}
_registry = threading.Lock()


@contextlib.contextmanager
def index_lock(directory: str | Path, timeout: float = defaults.LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the exclusive writer lock of ``directory`` (reentrant in this process); raises
    :class:`IndexLockTimeout` after ``timeout`` seconds of waiting."""
    path = lock_path(directory)
    with _registry:
        held = _held.setdefault(path, _Held())
    if not held.thread_lock.acquire(timeout=max(timeout, 0)):
        raise _timeout(directory, timeout)
    try:
        if held.depth == 0:
            held.fd = _flock(path, directory, timeout)
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
            if held.depth == 0 and held.fd is not None:
                os.close(held.fd)  # releases the flock
                held.fd = None
    finally:
        held.thread_lock.release()


def existing_index_lock(directory: str | Path, timeout: float = defaults.LOCK_TIMEOUT_S) -> contextlib.AbstractContextManager[None]:
    """The writer lock of an existing index (:class:`IndexFormatError` if there is no such
    directory), for a writer to hold from loading the index to saving it."""
    if not Path(directory).is_dir():
        raise IndexFormatError(directory, "no such index directory")
    return index_lock(directory, timeout)


def _flock(path: Path, directory: str | Path, timeout: float) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
        if time.monotonic() >= deadline:
            os.close(fd)
            raise _timeout(directory, timeout)
        time.sleep(_POLL_S)


def _timeout(directory: str | Path, timeout: float) -> IndexLockTimeout:
    return IndexLockTimeout(f"{directory}: another writer has held this index for over {timeout:g} s "
                            f"(lock {lock_path(directory)}); try again when it has finished")


def temp_dir_name(directory: Path, kind: str = "tmp") -> Path:
    """A fresh sibling ``.<NAME>.<kind>-<PID>-<HEX>``: the owner's pid tells debris from work in progress."""
    return directory.parent / f".{directory.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _owner(name: str, directory: Path) -> int | None:
    """The pid in a temporary folder's name; ``None`` if it names none (folders written before
    pids were recorded)."""
    match = re.fullmatch(rf"\.{re.escape(directory.name)}\.(?:tmp|old)-(?:(\d+)-)?[0-9a-f]+", name)
    if match is None:
        raise ValueError(name)
    return int(match.group(1)) if match.group(1) else None


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_debris(directory: str | Path) -> list[Path]:
    """Remove the temporary folders that killed saves of ``directory`` left beside it (call with
    the lock held); folders of a live process other than this one are kept. Returns those removed."""
    directory = Path(directory).absolute()
    removed = []
    if not directory.parent.is_dir():
        return removed
    for entry in directory.parent.glob(f".{glob.escape(directory.name)}.*-*"):
        try:
            pid = _owner(entry.name, directory)
        except ValueError:
            continue
        if pid is not None and (pid == os.getpid() or process_alive(pid)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed



def read_generation(directory: str | Path) -> int:
    """The version counter in ``directory``'s manifest (0: no index there, or one saved before
    versions were counted). Read without verifying checksums: only writers holding the lock use it."""
    try:
        generation = json.loads((Path(directory) / MANIFEST).read_text()).get("generation", 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def check_not_stale(directory: str | Path, loaded: int) -> None:
    """:class:`StaleIndexError` unless the index in ``directory`` is still at version ``loaded``
    (call with the lock held)."""
    current = read_generation(directory)
    if current != loaded:
        raise StaleIndexError(f"{directory}: the index changed on disk since it was loaded (version {loaded}, now {current}); "
                              "saving would drop that change: load it again and redo this update")
