"""Passage encoding as a Ray map step: :class:`RayEncoder` is a text encoder for
``ISORAGIndex.build`` (``isorag index --ray``) whose ``encode`` runs on a Ray cluster."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from isorag_pyg import defaults
from isorag_pyg.encoders.embedding_cache import cache_key
from isorag_pyg.encoders.sentence import SentenceEncoder
from isorag_pyg.scale.ray_map import ray_map


@dataclass(frozen=True)
class EncodeStep:
    """Load a :class:`SentenceEncoder` from ``encoder_args`` on the worker, check that it is the
    model the driver expects (``fingerprint``: the same files on every node), and map batches of
    texts to embeddings."""

    fingerprint: str
    encoder_args: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[[list[str]], np.ndarray]:
        encoder = SentenceEncoder(**self.encoder_args, cache_dir=None, show_progress=False)
        if encoder.fingerprint != self.fingerprint:
            raise RuntimeError(f"the encoder {encoder.name!r} on this Ray worker differs from the driver's "
                               "(fingerprint mismatch): install the same model and package version on every node")
        return lambda texts: encoder.encode(texts).numpy()


class RayEncoder:
    """A text encoder for ``ISORAGIndex.build`` whose ``encode`` maps the texts over Ray actors
    (:func:`~isorag_pyg.scale.ray_map.ray_map`), each with its own copy of the model, and
    returns the embeddings in the order of the texts. Name and fingerprint are those of the
    same model encoded in one process (an index built either way takes the same queries), and
    the embedding cache is shared with it.

    Args:
        model: a sentence-transformers name or path, the same on every node.
        address: the Ray cluster (``"auto"``, ``"ray://head:10001"``...; ``None``: this machine).
        workers: encoder actors (one per GPU, or per group of ``cpus_per_worker`` cores).
        batch_size: texts per Ray batch; ``encoder_batch_size``: texts per forward pass.
        device: the actors' torch device (default: CUDA when the worker has it).
    """

    def __init__(self, model: str = defaults.ENCODER, address: str | None = None, workers: int = defaults.RAY_WORKERS, batch_size: int = 256,
                 cpus_per_worker: float = defaults.RAY_CPUS_PER_WORKER, gpus_per_worker: float = defaults.RAY_GPUS_PER_WORKER,
                 encoder_batch_size: int = 64,
                 device: str | None = None, cache_dir: str | Path | None = "default"):
        self.local = SentenceEncoder(model, batch_size=encoder_batch_size, device=device, cache_dir=cache_dir, show_progress=False)
        self.name = self.local.name
        self.address, self.workers, self.batch_size = address, workers, batch_size
        self.cpus_per_worker, self.gpus_per_worker = cpus_per_worker, gpus_per_worker
        self.encoder_args = {"model": model, "batch_size": encoder_batch_size, "device": device}

    @property
    def fingerprint(self) -> str:
        return self.local.fingerprint

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """``[len(texts), dim]`` L2-normalised float32 embeddings, computed on the Ray cluster
        (or read from the embedding cache)."""
        texts = list(texts)
        if not texts:
            raise ValueError("encode() needs at least one text")
        cache, key = self.local.cache, cache_key(self.fingerprint, texts)
        if cache is not None and (hit := cache.load(key, len(texts))) is not None:
            return hit
        step = EncodeStep(self.fingerprint, self.encoder_args)
        emb = torch.from_numpy(ray_map(texts, step, self.address, self.workers, self.batch_size, self.cpus_per_worker, self.gpus_per_worker))
        if cache is not None:
            cache.save(key, emb)
        return emb
