"""Request latency as the server sees it: a histogram of seconds from a ``POST /retrieve``
request's arrival at its handler to its answer being ready (queueing, the batch, serialisation;
not the network or the client). Cumulative counts in fixed buckets, so that a client reads
``GET /health`` before and after a run and takes percentiles of the difference."""
from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence

#: Bucket upper bounds in milliseconds: 1 ms to about 56 s, each 1.25 times the last (a
#: percentile read from them above 1 ms is at most 25% high; below, it reads 1 ms), then +inf.
BUCKETS_MS: tuple[float, ...] = (*(round(1.25**i, 3) for i in range(50)), float("inf"))


class LatencyHistogram:
    """Counts of observed latencies per bucket of :data:`BUCKETS_MS` (thread-safe)."""

    def __init__(self) -> None:
        self._counts = [0] * len(BUCKETS_MS)
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one latency of ``seconds``."""
        bucket = bisect.bisect_left(BUCKETS_MS, seconds * 1e3)
        with self._lock:
            self._counts[bucket] += 1

    def counts(self) -> list[int]:
        """The cumulative count in each bucket (a copy)."""
        with self._lock:
            return list(self._counts)

    def to_dict(self) -> dict[str, object]:
        """``{"buckets_ms", "counts", "p50_ms", "p99_ms"}`` over every request so far (``GET /health``)."""
        counts = self.counts()
        return {"buckets_ms": [b if b != float("inf") else None for b in BUCKETS_MS], "counts": counts,
                "p50_ms": percentile_ms(counts, 0.5), "p99_ms": percentile_ms(counts, 0.99)}


def percentile_ms(counts: Sequence[int], q: float) -> float | None:
    """The upper bound (ms) of the bucket holding the ``q`` quantile of ``counts`` (per bucket of
    :data:`BUCKETS_MS`): an upper estimate within one bucket (1 ms for anything faster); ``None`` with no count, or when the
    quantile lies in the last, unbounded bucket."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must lie in (0, 1], got {q}")
    total = sum(counts)
    if total == 0:
        return None
    rank, seen = q * total, 0
    for bound, count in zip(BUCKETS_MS, counts):
        seen += count
        if seen >= rank:
            return None if bound == float("inf") else bound
    return None
