"""A resumable, append-only answer cache (JSON lines), safe against interrupted runs."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def request_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """Identifies one generation request: model, messages and sampling parameters."""
    return hashlib.sha256(json.dumps([model, messages, params], sort_keys=True).encode()).hexdigest()


class AnswerCache:
    """``key -> record``; each answer is appended and fsynced as soon as it arrives, so a crash
    loses at most the answer being written, and a torn last line is skipped on reload."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self.records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if self.path and self.path.exists():
            for lineno, line in enumerate(self.path.read_text().splitlines(), start=1):
                try:
                    record = json.loads(line)
                    self.records[record["key"]] = record
                except (json.JSONDecodeError, KeyError, TypeError):
                    log.warning("%s: skipping unreadable line %d (interrupted write?)", self.path, lineno)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def put(self, record: dict[str, Any]) -> None:
        with self._lock:
            if record["key"] in self.records:
                return
            self.records[record["key"]] = record
            if self.path is None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
