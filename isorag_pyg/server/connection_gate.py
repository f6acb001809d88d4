"""Which connections the server keeps open when more arrive than it allows: a flood of idle or
slow sockets must not starve clients that send whole requests.

A connection is *waiting* from its accept until its request has fully arrived, and again
between an answer and the next request on a keep-alive connection; it is *busy* while its
request is answered. Only waiting connections are ever closed to make room, those that never
sent a whole request first (oldest first), then idle keep-alive ones (oldest first): a
well-behaved client's request, once complete, is never dropped, and its fresh connection is the
newest, so the last to go. Without a waiting connection to close, a new one is refused (503).
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Protocol


class Closable(Protocol):
    def evict(self) -> None:
        """Close the connection now (the gate has already forgotten it)."""


class _Waiting:
    """Waiting connections in the order they began to wait: fresh ones (no whole request yet) and
    idle keep-alive ones."""

    def __init__(self) -> None:
        self.fresh: OrderedDict[Closable, None] = OrderedDict()
        self.idle: OrderedDict[Closable, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self.fresh) + len(self.idle)

    def add(self, conn: Closable, fresh: bool) -> None:
        (self.fresh if fresh else self.idle)[conn] = None

    def discard(self, conn: Closable) -> None:
        self.fresh.pop(conn, None)
        self.idle.pop(conn, None)

    def oldest(self) -> Closable | None:
        """The first to close: the oldest fresh connection, else the oldest idle one."""
        for queue in (self.fresh, self.idle):
            if queue:
                return next(iter(queue))
        return None


class ConnectionGate:
    """Admission of a server's connections.

    ``max_connections`` bounds the open connections: one more closes the oldest waiting
    connection (see the module), or is refused when every connection is busy.
    ``max_per_client`` bounds the waiting connections of one client address: one more closes
    that client's own oldest waiting connection. ``stats`` counts ``accepted``, ``refused``,
    ``evicted`` and ``timed_out`` (closed by the read deadline, counted by the protocol).
    """

    def __init__(self, max_connections: int, max_per_client: int):
        self.max_connections, self.max_per_client = max_connections, max_per_client
        self._open: dict[Closable, str] = {}
        self._waiting = _Waiting()
        self._clients: dict[str, _Waiting] = {}
        self.stats: Counter[str] = Counter()

    def opened(self, conn: Closable, client: str) -> bool:
        """Admit a new connection from ``client`` (closing others to make room); ``False``: refuse it."""
        own = self._clients.get(client)
        if own is not None and len(own) >= self.max_per_client:
            self._evict(own.oldest())
        if len(self._open) >= self.max_connections:
            victim = self._waiting.oldest()
            if victim is None:
                self.stats["refused"] += 1
                return False
            self._evict(victim)
        self._open[conn] = client
        self._add(conn, fresh=True)
        self.stats["accepted"] += 1
        return True

    def busy(self, conn: Closable) -> None:
        """``conn``'s request has fully arrived: it is no longer a candidate to close."""
        if conn in self._open:
            self._discard_waiting(conn)

    def waiting(self, conn: Closable) -> None:
        """``conn`` was answered and stays open for another request."""
        if conn in self._open:
            self._discard_waiting(conn)
            self._add(conn, fresh=False)

    def closed(self, conn: Closable) -> None:
        """Forget ``conn`` (closed by either side; a no-op for one already forgotten)."""
        if conn in self._open:
            self._discard_waiting(conn)
            del self._open[conn]

    def describe(self) -> dict[str, int]:
        """Open and waiting connections now, and the counters since start-up."""
        return {"open": len(self._open), "waiting": len(self._waiting),
                **{key: self.stats[key] for key in ("accepted", "refused", "evicted", "timed_out")}}

    def _add(self, conn: Closable, fresh: bool) -> None:
        self._waiting.add(conn, fresh)
        self._clients.setdefault(self._open[conn], _Waiting()).add(conn, fresh)

    def _discard_waiting(self, conn: Closable) -> None:
        self._waiting.discard(conn)
        client = self._open[conn]
        if (own := self._clients.get(client)) is not None:
            own.discard(conn)
            if not len(own):
                del self._clients[client]

    def _evict(self, conn: Closable | None) -> None:
        if conn is None:
            return
        self.closed(conn)
        self.stats["evicted"] += 1
        conn.evict()
