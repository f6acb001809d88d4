"""A bound on how long a client may take to send its request (uvicorn has none: its keep-alive
timeout only covers idle connections between requests, so a client sending one byte every
half second held a connection forever).

:func:`guarded_protocol` derives uvicorn's HTTP protocol class with a deadline started at the
first byte of a request: if the request's headers and body have not all arrived
``read_timeout`` seconds later, the connection is closed. Answering may take longer (that is
bounded by the batcher's queue and its 503s).
"""
from __future__ import annotations

import asyncio
from typing import Any


def guarded_protocol(base: type[asyncio.Protocol], read_timeout: float) -> type[asyncio.Protocol]:
    """``base`` (one of uvicorn's HTTP protocols) with a ``read_timeout`` per request."""

    class SlowClientGuard(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._read_deadline: asyncio.TimerHandle | None = None
            self._cycle_at_first_byte: Any = None

        def data_received(self, data: bytes) -> None:
            if self._read_deadline is None:
                self._cycle_at_first_byte = self.cycle
                self._read_deadline = self.loop.call_later(read_timeout, self._read_timed_out)
            super().data_received(data)

        def on_response_complete(self) -> None:
            self._cancel_read_deadline()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_read_deadline()
            super().connection_lost(exc)

        def _cancel_read_deadline(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            still_reading = self.cycle is None or self.cycle is self._cycle_at_first_byte or self.cycle.more_body
            if still_reading and not self.transport.is_closing():
                self.transport.close()

    SlowClientGuard.__name__ = SlowClientGuard.__qualname__ = f"SlowClientGuard{base.__name__}"
    return SlowClientGuard
