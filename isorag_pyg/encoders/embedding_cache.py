"""An on-disk embedding cache keyed by (model fingerprint, texts), written atomically and bounded
in size, the least recently used files out (:mod:`~isorag_pyg.encoders.cache_files`)."""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from isorag_pyg.encoders.cache_files import cache_limit, default_cache_dir, touch, trim

log = logging.getLogger(__name__)

__all__ = ["EmbeddingCache", "cache_key", "default_cache_dir"]


def cache_key(model_fingerprint: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha256(model_fingerprint.encode())
    for text in texts:
        encoded = text.encode()
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


class EmbeddingCache:
    """Stores one tensor per key; a corrupt or mismatched file is discarded, never trusted. The
    folder's embeddings stay within ``max_bytes`` (default: :func:`~isorag_pyg.encoders.cache_files.cache_limit`):
    after each write the least recently used (written or read) go; a tensor larger than that is not cached."""

    def __init__(self, directory: str | Path, max_bytes: int | None = None):
        self.directory = Path(directory)
        self.max_bytes = cache_limit() if max_bytes is None else max_bytes

    def path(self, key: str) -> Path:
        return self.directory / f"emb-{key[:40]}.pt"

    def load(self, key: str, num_rows: int) -> torch.Tensor | None:
        path = self.path(key)
        if not path.exists():
            return None
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
            tensor = payload["embeddings"]
            if payload["key"] != key or tensor.ndim != 2 or tensor.shape[0] != num_rows or not torch.isfinite(tensor).all():
                raise ValueError("key, shape or values do not match")
        except Exception as err:  # noqa: BLE001 - any unreadable file is treated as absent
            log.warning("discarding unusable embedding cache %s (%s); recomputing", path, err)
            path.unlink(missing_ok=True)
            return None
        touch(path)  # recently used: the last to go
        return tensor

    def save(self, key: str, tensor: torch.Tensor) -> Path | None:
        """Cache ``tensor`` under ``key`` (its path; ``None`` when it alone exceeds the limit)."""
        if tensor.numel() * tensor.element_size() > self.max_bytes:
            log.info("embeddings of %d rows exceed the embedding cache's limit of %d bytes (ISORAG_CACHE_MAX_BYTES): not cached",
                     tensor.size(0), self.max_bytes)
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".pt")
        try:
            with os.fdopen(fd, "wb") as handle:
                torch.save({"key": key, "embeddings": tensor.cpu()}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if removed := trim(self.directory, self.max_bytes):
            log.info("embedding cache %s: %d least recently used file(s) removed to stay within %d bytes", self.directory, len(removed),
                     self.max_bytes)
        return path
