"""An on-disk embedding cache keyed by (model fingerprint, texts), written atomically."""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$ISORAG_CACHE_DIR`` or ``~/.cache/isorag_pyg``."""
    return Path(os.environ.get("ISORAG_CACHE_DIR", Path.home() / ".cache" / "isorag_pyg"))


def cache_key(model_fingerprint: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha256(model_fingerprint.encode())
    for text in texts:
        encoded = text.encode()
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


class EmbeddingCache:
    """Stores one tensor per key; a corrupt or mismatched file is discarded, never trusted."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)

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
        return tensor

    def save(self, key: str, tensor: torch.Tensor) -> Path:
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
        return path
