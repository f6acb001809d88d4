"""The modes and owner an index directory keeps across saves.

A save writes a new directory and swaps it in, so without care every update would give the
index the writer's umask: ``chmod 700 priv; chmod 600 priv/*`` then ``isorag add`` under umask
022 left ``755`` and ``644``, every passage readable by every local user. So a save over an
index gives the new directory the old one's mode, each file the mode of the old file of that
name (a file the old version did not have: the old manifest's), and their owner and group where
this process may set them. A first save follows the umask (``0777`` / ``0666`` less it). The
temporary directory is ``0700`` from its creation until its final mode is set just before the
swap, so a save killed midway leaves nothing more readable than the index itself (a folder killed
between its final modes and the swap has the index's modes).
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from isorag_pyg.store.layout import MANIFEST
from isorag_pyg.utils.files import process_umask


@dataclass(frozen=True)
class Permissions:
    """Modes (and, when known, owner and group) for an index directory and its files."""

    directory_mode: int
    file_mode: int  # for a file without a mode of its own
    file_modes: dict[str, int] = field(default_factory=dict)
    owner: tuple[int, int] | None = None

    @classmethod
    def of(cls, directory: Path) -> Permissions:
        """Those of the index in ``directory``, else what the umask gives a new one."""
        try:
            info = directory.stat()
            files = {entry.name: entry.stat(follow_symlinks=False) for entry in os.scandir(directory) if entry.is_file(follow_symlinks=False)}
        except (FileNotFoundError, NotADirectoryError):
            files, info = {}, None
        if info is None or MANIFEST not in files:
            umask = process_umask()
            return cls(0o777 & ~umask, 0o666 & ~umask)
        return cls(stat.S_IMODE(info.st_mode), stat.S_IMODE(files[MANIFEST].st_mode),
                   {name: stat.S_IMODE(st.st_mode) for name, st in files.items()}, (info.st_uid, info.st_gid))

    def apply_file(self, path: Path) -> None:
        self._chown(path)
        os.chmod(path, self.file_modes.get(path.name, self.file_mode))

    def apply_directory(self, path: Path) -> None:
        self._chown(path)
        os.chmod(path, self.directory_mode)

    def _chown(self, path: Path) -> None:
        """The old owner and group where permitted: both as root, the group alone for a member of it."""
        if self.owner is None:
            return
        info = path.stat()
        if (info.st_uid, info.st_gid) == self.owner:
            return
        for uid, gid in (self.owner, (-1, self.owner[1])):
            try:
                os.chown(path, uid, gid)
                return
            except PermissionError:
                continue
