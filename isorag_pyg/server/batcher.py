"""Dynamic micro-batching: requests that arrive close together are answered by one call of a
batch function, run on one worker thread so that the event loop never blocks on it."""
from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)


class Sized(Protocol):
    def __len__(self) -> int: ...


R = TypeVar("R", bound=Sized)
T = TypeVar("T")


class BatcherUnavailable(RuntimeError):
    """The batcher cannot take the request: too much is queued, or it is shutting down."""


@dataclass
class _Pending(Generic[R]):
    request: R
    future: asyncio.Future
    arrival: float


class MicroBatcher(Generic[R, T]):
    """Collects requests into batches and answers each batch with one call of ``run``.

    The first request of a batch waits at most ``window`` seconds for others; the batch closes
    early once ``max_batch`` items (``len(request)`` each, e.g. questions) are queued. Requests
    are taken whole, in arrival order, while they fit ``max_batch`` (the first always goes).
    While the worker is busy, new requests queue and form the next batch as soon as it is
    free, without waiting a window again. ``run`` returns one outcome per request, a result or
    an exception for that request alone; if ``run`` itself raises, the whole batch fails with
    that error, and the batcher keeps serving.

    Args:
        run: the batch function (called on one worker thread, never concurrently).
        window: seconds the first request of a batch waits for company.
        max_batch: items per batch (``1``: every request on its own).
        max_pending: queued items beyond which :meth:`submit` raises :class:`BatcherUnavailable`.
    """

    def __init__(self, run: Callable[[list[R]], Sequence[T | Exception]], window: float, max_batch: int, max_pending: int):
        if window < 0 or max_batch < 1 or max_pending < 1:
            raise ValueError("window must be >= 0, max_batch and max_pending >= 1")
        self.run, self.window, self.max_batch, self.max_pending = run, window, max_batch, max_pending
        self._queue: collections.deque[_Pending[R]] = collections.deque()
        self._queued = 0  # items in the queue
        self._in_flight: list[_Pending[R]] = []
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def queued(self) -> int:
        """Items waiting for the worker."""
        return self._queued

    def start(self) -> None:
        """Start the worker (call from the running event loop)."""
        if self._task is not None:
            raise RuntimeError("the batcher is already running")
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="isorag-batch")
        self._task = asyncio.get_running_loop().create_task(self._serve(), name="isorag-batcher")

    async def close(self) -> None:
        """Stop the worker; requests still queued or in flight fail with :class:`BatcherUnavailable`."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        for pending in [*self._in_flight, *self._queue]:
            if not pending.future.done():
                pending.future.set_exception(BatcherUnavailable("the server is shutting down"))
        self._queue.clear()
        self._queued, self._in_flight = 0, []
        assert self._executor is not None
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, request: R) -> T:
        """The outcome of ``request`` once its batch has run (its exception is raised)."""
        if self._task is None or self._task.done():
            raise BatcherUnavailable("the server is not accepting requests (shutting down)")
        if self._queued + len(request) > self.max_pending:
            raise BatcherUnavailable(f"the server is busy ({self._queued} questions queued); retry later")
        loop = asyncio.get_running_loop()
        pending = _Pending(request, loop.create_future(), loop.time())
        self._queue.append(pending)
        self._queued += len(request)
        assert self._arrived is not None
        self._arrived.set()
        return await pending.future

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            if not batch:
                continue
            self._in_flight = batch
            try:
                outcomes = list(await loop.run_in_executor(self._executor, self.run, [p.request for p in batch]))
                if len(outcomes) != len(batch):
                    raise RuntimeError(f"the batch function returned {len(outcomes)} outcomes for {len(batch)} requests")
            except Exception as err:  # the batch function broke: fail this batch, keep serving
                log.exception("a batch of %d requests failed", len(batch))
                outcomes = [err] * len(batch)
            for pending, outcome in zip(batch, outcomes):
                if pending.future.done():  # the client went away
                    continue
                if isinstance(outcome, Exception):
                    pending.future.set_exception(outcome)
                else:
                    pending.future.set_result(outcome)
            self._in_flight = []

    async def _next_batch(self) -> list[_Pending[R]]:
        """Wait for a request, then up to ``window`` after its arrival for others (or until
        ``max_batch`` items are queued); take whole requests while they fit."""
        assert self._arrived is not None
        while not self._queue:
            self._arrived.clear()
            await self._arrived.wait()
        loop = asyncio.get_running_loop()
        deadline = self._queue[0].arrival + self.window
        while self._queued < self.max_batch and (left := deadline - loop.time()) > 0:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                break
        batch: list[_Pending[R]] = []
        size = 0
        while self._queue and (not batch or size + len(self._queue[0].request) <= self.max_batch):
            pending = self._queue.popleft()
            self._queued -= len(pending.request)
            if pending.future.cancelled():  # the client went away while it waited
                continue
            batch.append(pending)
            size += len(pending.request)
        return batch
