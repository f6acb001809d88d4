"""The index a server answers from, replaced by a newly saved version without dropping a request.

:class:`ServedIndex` is the batcher's batch function: each batch is answered by the engine that
is current when the batch starts, so a reload swaps versions between batches. A reload opens
the new version (in the caller's thread, off the event loop), gives it the encoder already
loaded (same fingerprint; query cache included) or, for a version built with another encoder,
that version's own encoder prepared as the server prepares encoders (a fresh query cache of the
same size: the old one's vectors belong to another model), prepares its retrievers, and only
then makes it current; a version that fails to open leaves the current one serving. Every
answer carries the version that produced it. In a server that froze its loaded objects out of
the garbage collector (:meth:`ServedIndex.freeze`), the first batch after a reload frees the
replaced version and freezes the new one (one full collection per reload). The freeze is
process-wide: serve one app per process.

The served version reads private copies of its files, so files changed under it do no harm;
:meth:`ServedIndex.disk_state` says whether the directory still holds that version
(:class:`~isorag_pyg.store.disk_check.DiskCheck`) and logs one line whenever that changes.
"""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isorag_pyg.encoders import TextEncoder
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.server.engine import Hits, RetrievalEngine, RetrievalRequest
from isorag_pyg.server.memory import freeze_long_lived
from isorag_pyg.store.disk_check import DiskCheck, DiskState
from isorag_pyg.store.locking import read_generation

log = logging.getLogger(__name__)

#: Seconds between checks of the index's files when ``--watch-seconds`` does not say.
DISK_CHECK_S = 10.0


@dataclass(frozen=True)
class Served:
    """A request's hits and the index version that answered it."""

    hits: Hits
    version: int

    def __len__(self) -> int:
        return len(self.hits)


class ServedIndex:
    """The current :class:`RetrievalEngine` over the index in ``directory``, reloadable;
    ``serving_encoder`` prepares a reloaded version's own encoder when its fingerprint differs
    (default: as it is)."""

    def __init__(self, directory: str | Path, engine: RetrievalEngine, verify: bool = True,
                 serving_encoder: Callable[[TextEncoder], TextEncoder] = lambda encoder: encoder):
        self.directory, self.engine, self.verify = Path(directory), engine, verify
        self.serving_encoder = serving_encoder
        self._reload_lock = threading.Lock()
        self.reloads = 0
        self.refused_version: int | None = None  # the version on disk the watch failed to open last
        self.refused_reason = ""  # and why
        self.retry_in_s = 0.0  # and how long it waits before opening that version again
        self._retry_at = 0.0
        self.frozen = False  # the objects loaded are out of the collector's full collections (freeze)
        self._refreeze = False  # a reload replaced the version: free it and freeze anew before the next batch
        self._disk_lock = threading.Lock()
        self._disk, self._reported = self._disk_check(engine), DiskState("ok")

    @property
    def index(self) -> ISORAGIndex:
        return self.engine.index

    @property
    def version(self) -> int:
        return self.engine.index.generation

    def freeze(self) -> None:
        """Move what is loaded now (modules, index, model) out of the garbage collector's full
        collections (:func:`~isorag_pyg.server.memory.freeze_long_lived`); reloads keep it so."""
        freeze_long_lived()
        self.frozen = True

    def unfreeze(self) -> None:
        """Undo :meth:`freeze` (when the server stops)."""
        self.frozen = self._refreeze = False
        gc.unfreeze()

    def run(self, requests: Sequence[RetrievalRequest]) -> list[Served | Exception]:
        """Answer a batch with the engine current now (the batcher's batch function). After a
        reload, the first batch first frees the replaced version and freezes the new one: here,
        on the batch thread, no batch still holds the old engine."""
        if self._refreeze:
            self._refreeze = False
            freeze_long_lived()
        engine = self.engine
        version = engine.index.generation
        return [o if isinstance(o, Exception) else Served(o, version) for o in engine.run(requests)]

    @staticmethod
    def _disk_check(engine: RetrievalEngine) -> DiskCheck | None:
        origin = engine.index.origin
        return DiskCheck(origin) if origin is not None and origin.files else None

    def disk_state(self) -> DiskState:
        """Whether the directory still holds the served version (``"ok"``), another saved version
        (``"stale"``: a reload serves it) or files changed in place, or a saved version the watch
        could not open (``"changed"``: the served version is still answered, from its private
        copies); logged once per change."""
        with self._disk_lock:
            state = DiskState("ok") if self._disk is None else self._disk.state()
            if state.state == "stale" and self.refused_version is not None and read_generation(self.directory) == self.refused_version:
                state = DiskState("changed", (f"version {self.refused_version} on disk cannot be opened: {self.refused_reason}",))
            if state != self._reported:
                self._reported = state
                if state.state == "ok":
                    log.warning("index %s: the files on disk hold the served version %d again", self.directory, self.version)
                else:
                    log.warning("index %s: the files on disk no longer hold the served version %d (%s: %s); still serving it from memory",
                                self.directory, self.version, state.state, "; ".join(state.problems))
            return state

    def changed_on_disk(self) -> bool:
        return read_generation(self.directory) != self.version

    #: The watch opens a version it could not open again after this many seconds, twice as long
    #: after each failure, at most :attr:`RETRY_MAX_S` (a copy still landing, a passing error).
    RETRY_FIRST_S, RETRY_MAX_S = 30.0, 960.0

    def poll(self) -> dict[str, Any] | None:
        """The manifest watch's step: :meth:`reload` when the directory holds a version other than
        the one served; ``None`` when there is nothing new. A version that cannot be opened
        raises, and is then left alone for :attr:`retry_in_s` seconds (30 s, doubling after each
        failure up to 16 min) instead of being loaded and verified again every interval; a newer
        version is opened at once, and :meth:`reload` (``POST /reload``) opens it whenever asked."""
        on_disk = read_generation(self.directory)
        if on_disk == self.version or (on_disk == self.refused_version and time.monotonic() < self._retry_at):
            return None
        try:
            return self.reload()
        except Exception as err:
            self.refused_reason = str(err)
            again = on_disk == self.refused_version
            self.retry_in_s = min(2 * self.retry_in_s, self.RETRY_MAX_S) if again else self.RETRY_FIRST_S
            self.refused_version, self._retry_at = on_disk, time.monotonic() + self.retry_in_s
            raise

    def reload(self) -> dict[str, Any]:
        """Serve the version saved in ``directory`` if it is newer; errors leave the current one."""
        with self._reload_lock:
            if not self.changed_on_disk():
                return {"reloaded": False, **self.describe()}
            old = self.engine
            index = ISORAGIndex.load(self.directory, verify=self.verify)
            if index.encoder_spec["fingerprint"] == old.index.encoder_spec["fingerprint"]:
                index.encoder = old.index.encoder  # the model (and the query cache) stays loaded
            else:
                index.encoder = self.serving_encoder(index.encoder)
            engine = RetrievalEngine(index)
            engine.prepare(old)
            engine.stats = old.stats  # the counters carry on
            with self._disk_lock:
                self.engine, self._disk, self._reported = engine, self._disk_check(engine), DiskState("ok")
            self.reloads += 1
            self._refreeze = self.frozen
            return {"reloaded": True, **self.describe()}

    def describe(self) -> dict[str, Any]:
        return {"version": self.version, "passages": len(self.index)}
