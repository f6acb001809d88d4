"""The server's micro-batching knobs and request limits, in one checked object."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from isorag_pyg import defaults


@dataclass(frozen=True)
class ServerSettings:
    """How ``isorag serve`` batches and what it accepts.

    Args:
        batch_window_ms: how long the first request of a batch waits for others (milliseconds;
            ``0``: no waiting, but requests already queued still share a call).
        max_batch: questions per batched call; whole requests are added while they fit (a
            request is never split, so one larger than this is a batch of its own). ``1``
            turns micro-batching off: every request is encoded and retrieved on its own.
        max_questions: questions per request.
        max_k: largest ``k`` a request may ask for.
        max_question_chars: characters per question.
        max_body_bytes: request body size; larger bodies get 413 before they are read.
        max_pending: questions waiting for the worker; beyond it requests get 503 (overload).
        read_timeout_s: seconds a connection has, from its accept or the end of its previous
            answer, to send a whole request (headers and body); slower or idle ones are closed.
        max_connections: open connections; one more closes the oldest connection still waiting
            for its request (those that never sent one first), or gets 503 when all are busy
            (:mod:`~isorag_pyg.server.connection_gate`).
        max_connections_per_client: connections waiting for their request that one client
            address may hold; one more closes that client's oldest waiting connection.
        watch_seconds: check the index's manifest this often and serve a newly saved version
            (``None``: only on ``POST /reload``).
        query_cache: question embeddings kept in an LRU cache (a repeated question is not
            encoded again); ``0`` turns the cache off.
        api_key: the bearer token every endpoint but ``/health`` requires (``None``: none);
            never shown by ``repr`` or :meth:`to_dict`.
        allowed_hosts: the ``Host`` names answered (any port; ``"*"``: any name); others get 400
            (:mod:`~isorag_pyg.server.access`).
    """

    batch_window_ms: float = 2.0
    max_batch: int = 128
    max_questions: int = 64
    max_k: int = 100
    max_question_chars: int = 2000
    max_body_bytes: int = 1 << 20
    max_pending: int = 4096
    read_timeout_s: float = 10.0
    max_connections: int = 8192
    max_connections_per_client: int = 4096
    watch_seconds: float | None = None
    query_cache: int = 4096
    api_key: str | None = field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = defaults.ALLOWED_HOSTS

    def __post_init__(self) -> None:
        if not 0 <= self.batch_window_ms <= 1000:
            raise ValueError(f"batch window must lie in [0, 1000] ms, got {self.batch_window_ms}")
        if not 0 < self.read_timeout_s <= 3600:
            raise ValueError(f"read timeout must lie in (0, 3600] s, got {self.read_timeout_s}")
        if self.watch_seconds is not None and not 0.1 <= self.watch_seconds <= 86400:
            raise ValueError(f"watch interval must lie in [0.1, 86400] s, got {self.watch_seconds}")
        for name in ("max_batch", "max_questions", "max_k", "max_question_chars", "max_body_bytes", "max_pending", "max_connections",
                     "max_connections_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.query_cache, bool) or not isinstance(self.query_cache, int) or self.query_cache < 0:
            raise ValueError(f"query_cache must be a non-negative integer, got {self.query_cache!r}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key.isascii() or not self.api_key.isprintable()
                                         or not self.api_key.strip() or self.api_key != self.api_key.strip()):
            raise ValueError("the API key must be a non-empty string of printable ASCII characters without surrounding spaces")
        if not isinstance(self.allowed_hosts, tuple) or not self.allowed_hosts or not all(
                isinstance(h, str) and h.strip() for h in self.allowed_hosts):
            raise ValueError(f"allowed_hosts must be a non-empty tuple of host names, got {self.allowed_hosts!r}")
        if self.max_pending < self.max_questions:
            raise ValueError(f"max_pending ({self.max_pending}) must be at least max_questions ({self.max_questions})")

    @classmethod
    def unbatched(cls, **limits: Any) -> ServerSettings:
        """Micro-batching off (every request on its own), with the given limits."""
        return cls(**{**limits, "batch_window_ms": 0.0, "max_batch": 1})

    @property
    def batching(self) -> bool:
        return self.max_batch > 1

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON values, the API key left out (``api_key_required`` says whether there is one)."""
        values = {key: value for key, value in dataclasses.asdict(self).items() if key != "api_key"}
        return {**values, "allowed_hosts": list(self.allowed_hosts), "api_key_required": self.api_key is not None, "batching": self.batching}
