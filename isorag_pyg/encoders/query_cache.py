"""An LRU cache of question embeddings in front of any encoder: a repeated question is not
encoded again, and a batch's misses are encoded in one call."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import torch

from isorag_pyg.encoders.sentence import TextEncoder


class LRUQueryEncoder:
    """``encoder`` with the ``size`` most recently used texts' embeddings kept in memory (same
    name, fingerprint and backend, so an index accepts it in place of ``encoder``). ``hits`` and
    ``misses`` count texts."""

    def __init__(self, encoder: TextEncoder, size: int):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.inner, self.size = encoder, size
        self.name, self.fingerprint = encoder.name, encoder.fingerprint
        self.backend = getattr(encoder, "backend", "torch")
        self.hits = self.misses = 0
        self._cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        texts = list(texts)
        with self._lock:
            found = {t: self._cache[t] for t in texts if t in self._cache}
            for text in found:
                self._cache.move_to_end(text)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            for text, row in zip(missing, self.inner.encode(missing)):
                found[text] = row.clone()  # its own storage: a view would keep the whole batch's alive
            with self._lock:
                for text in missing:
                    self._cache[text] = found[text]
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return torch.stack([found[t] for t in texts])
