"""uvicorn's HTTP protocol with a read deadline from accept and the server's admission.

uvicorn alone never closes a connection that sends nothing (its keep-alive timeout starts only
after an answer) and counts idle sockets against ``limit_concurrency``, so a thousand idle
sockets took a server offline. :func:`guarded_protocol` derives uvicorn's protocol class so
that every connection has ``read_timeout`` seconds from its accept, or from the end of its
previous answer, to send a whole request (headers and body), or is closed; and so that a
:class:`~isorag_pyg.server.connection_gate.ConnectionGate` decides which connections stay open
when more arrive than allowed. Answering may take longer (that is bounded by the batcher's
queue and its 503s).
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from isorag_pyg.server.connection_gate import ConnectionGate


def refusal(detail: str) -> bytes:
    """A whole ``503`` HTTP response with ``{"detail": detail}``, closing the connection."""
    body = json.dumps({"detail": detail}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))


def guarded_protocol(base: type[asyncio.Protocol], read_timeout: float, gate: ConnectionGate) -> type[asyncio.Protocol]:
    """``base`` (one of uvicorn's HTTP protocols) with a read deadline and ``gate``'s admission."""
    refused = refusal(f"the server holds {gate.max_connections} connections, all busy; retry later")

    class GuardedProtocol(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None
            self._waiting = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            if not gate.opened(self, self.client[0] if self.client else ""):
                self.transport.write(refused)
                self.transport.close()
                return
            self._wait()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self.cycle
            if self._waiting and cycle is not None and not cycle.more_body and not cycle.response_complete:
                self._waiting = False  # the whole request is in: answered, however long that takes
                self._cancel_deadline()
                gate.busy(self)

        def on_response_complete(self) -> None:
            pipelined = bool(getattr(self, "pipeline", None))
            super().on_response_complete()
            if not pipelined and not self.transport.is_closing():
                gate.waiting(self)
                self._wait()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_deadline()
            gate.closed(self)
            super().connection_lost(exc)

        def evict(self) -> None:
            """Closed by the gate to make room for another connection."""
            self._cancel_deadline()
            if not self.transport.is_closing():
                self.transport.close()

        def _wait(self) -> None:
            self._waiting = True
            self._cancel_deadline()
            self._deadline = self.loop.call_later(read_timeout, self._timed_out)

        def _cancel_deadline(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _timed_out(self) -> None:
            self._deadline = None
            if self._waiting and not self.transport.is_closing():
                gate.stats["timed_out"] += 1
                gate.closed(self)
                self.transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol
