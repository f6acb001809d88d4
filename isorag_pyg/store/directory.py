"""An index directory on disk: a JSON manifest with a checksum of every file, written atomically
under the directory's writer lock, and read back from one opened version.

Nothing here unpickles: tensors are safetensors, passages JSON lines, the manifest JSON, so
opening an index from an untrusted source never executes code. The checksums detect corrupt,
truncated or edited files; they do not authenticate who wrote them.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isorag_pyg import defaults
from isorag_pyg.store.layout import FORMAT_VERSION, MANIFEST, IndexFormatError
from isorag_pyg.store.locking import index_lock, read_generation, remove_debris, temp_dir_name
from isorag_pyg.store.permissions import Permissions
from isorag_pyg.store.snapshot import OpenedVersion
from isorag_pyg.store.validation import validate_manifest
from isorag_pyg.utils.files import file_sha256


def _manifest_digest(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where
    the system has no such call."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system or kernel cannot
        return False
    raise OSError(err, os.strerror(err), str(b))


def is_index_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def check_destination(target: str | Path) -> None:
    """Fail now, before any work, where saving to ``target`` would fail: :class:`FileExistsError`
    when it is something other than a missing path, an empty folder or an index;
    :class:`NotADirectoryError` or :class:`PermissionError` when what would hold it (the nearest
    path above it that exists) is not a folder this process may write in."""
    target = Path(target).absolute()
    if target.exists() and not (target.is_dir() and (is_index_dir(target) or not any(target.iterdir()))):
        raise FileExistsError(f"{target}: exists and is not an isorag index (refusing to replace it)")
    holder = target.parent
    while not holder.exists() and holder != holder.parent:
        holder = holder.parent
    if not holder.is_dir() or not os.access(holder, os.W_OK | os.X_OK):
        error = PermissionError if holder.is_dir() else NotADirectoryError
        raise error(f"{target}: cannot write there ({holder} is not a folder this process may write in)")


def write_index_dir(target: str | Path, write_files: Callable[[Path], dict[str, Any]],
                    lock_timeout: float = defaults.LOCK_TIMEOUT_S) -> Path:
    """Write an index to ``target`` atomically, holding its writer lock (see
    :mod:`~isorag_pyg.store.locking`; temporary folders of killed saves are removed first).

    ``write_files(tmp_dir)`` writes the data files into a fresh sibling directory and returns the
    manifest (without ``files``); the checksum of every file and of the manifest are added, all
    is fsynced, and only then does the new directory take ``target``'s place (an atomic swap
    where the system allows it). A crash before that leaves the previous index as it was.
    ``target`` may be missing, an empty directory or an earlier index; anything else is refused.
    The manifest's ``generation`` counts the versions saved there. Over an earlier index, the
    directory and files keep its modes (and owner, where permitted); a first save follows the
    umask (:mod:`~isorag_pyg.store.permissions`).
    """
    target = Path(target)
    with index_lock(target, lock_timeout):
        remove_debris(target)
        return _write_locked(target, write_files)


def _write_locked(target: Path, write_files: Callable[[Path], dict[str, Any]]) -> Path:
    check_destination(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    permissions = Permissions.of(target)
    tmp = temp_dir_name(target)
    tmp.mkdir(mode=0o700)  # private until the final modes are set, just before the swap
    try:
        manifest = {**write_files(tmp), "generation": read_generation(target) + 1}
        files = {}
        for path in sorted(p for p in tmp.iterdir() if p.name != MANIFEST):
            permissions.apply_file(path)  # safetensors writes 0600
            _fsync(path)
            files[path.name] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        manifest = {**manifest, "files": files}
        manifest["manifest_sha256"] = _manifest_digest(manifest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        permissions.apply_file(tmp / MANIFEST)
        _fsync(tmp / MANIFEST)
        permissions.apply_directory(tmp)
        _fsync(tmp)
        if not target.exists():
            os.rename(tmp, target)
        elif _exchange(tmp, target):
            shutil.rmtree(tmp)  # tmp now holds the previous index
        else:
            old = temp_dir_name(target, "old")
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old)
        _fsync(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_manifest(directory: str | Path, verify: bool = True, opened: OpenedVersion | None = None,
                  deferred: tuple[str, ...] = ()) -> dict[str, Any]:
    """The manifest of an index directory, after checking its format version, its own checksum,
    its schema (:mod:`~isorag_pyg.store.validation`) and, unless ``verify`` is ``False``, the
    size and SHA-256 of every file it lists (sizes are always checked), each file copied into
    private memory first so that the bytes checked are the bytes read later; a ``deferred`` file
    is checked in place, not copied (its reader copies and checks it again on first use). With ``opened``, the
    manifest and files of that opened version are read."""
    directory = Path(directory)
    if opened is None:
        with OpenedVersion(directory) as version:
            return read_manifest(directory, verify, version)
    path = directory / MANIFEST
    try:
        manifest = json.loads(opened.manifest_bytes)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise IndexFormatError(path, f"not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("format_version"), int):
        raise IndexFormatError(path, "no format_version: not an isorag index manifest")
    if manifest["format_version"] > FORMAT_VERSION:
        raise IndexFormatError(path, f"index format {manifest['format_version']} is newer than this isorag_pyg reads "
                                     f"({FORMAT_VERSION}); upgrade isorag_pyg")
    if manifest.get("manifest_sha256") != _manifest_digest(manifest):
        raise IndexFormatError(path, "checksum mismatch: the manifest was edited or corrupted")
    validate_manifest(path, manifest)
    for name, expected in manifest["files"].items():
        shown = directory / name
        copy = None if name in deferred else opened.copy(name, digest=verify)
        size = opened.size(name) if copy is None else copy.size
        if size is None:
            raise IndexFormatError(shown, "missing")
        if size != expected["bytes"]:
            raise IndexFormatError(shown, f"size {size} bytes, the manifest says {expected['bytes']} (truncated or replaced)")
        if verify and (opened.digest(name) if copy is None else copy.sha256) != expected["sha256"]:
            raise IndexFormatError(shown, "checksum mismatch (corrupted or tampered with)")
    return manifest
