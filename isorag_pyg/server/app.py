"""The HTTP API (FastAPI): ``POST /retrieve``, ``POST /reload``, ``GET /health``, ``GET /info``;
with a reader, answers too: ``POST /answer`` (:mod:`~isorag_pyg.server.answers`) and the
OpenAI-compatible ``GET /v1/models``, ``POST /v1/chat/completions``
(:mod:`~isorag_pyg.server.openai_api`); ``POST /explain`` (:mod:`~isorag_pyg.server.explain`) and
the web page at ``GET /`` (:mod:`~isorag_pyg.server.page`).

Every route, those added to the app later included, sits behind the access checks (Host
allow-list, API key, no cross-site writes: :mod:`~isorag_pyg.server.access`) and the body
limit. Every bad request gets a 4xx whose JSON body is ``{"detail": "<one-line message>"}``:
malformed JSON or a Host not allowed 400, no or a wrong API key 401, a cross-origin write 403,
a body over the size limit 413, a write not sent as JSON 415, anything else wrong with the
request 422; an overloaded or stopping server answers 503. Answers carry the index version that
produced them in the ``X-Index-Version`` header.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from isorag_pyg.encoders import TextEncoder
from isorag_pyg.encoders.query_cache import LRUQueryEncoder
from isorag_pyg.index import RETRIEVERS, ISORAGIndex
from isorag_pyg.index.results import answer_json
from isorag_pyg.qa.reader_spec import Reader
from isorag_pyg.server.access import OPEN_PATHS, AccessGuard
from isorag_pyg.server.answers import add_answer_route
from isorag_pyg.server.batcher import BatcherUnavailable, MicroBatcher
from isorag_pyg.server.body_limit import BodyLimit
from isorag_pyg.server.connection_gate import ConnectionGate
from isorag_pyg.server.engine import RetrievalEngine, RetrievalRequest
from isorag_pyg.server.explain import explain_router
from isorag_pyg.server.latency import LatencyHistogram
from isorag_pyg.server.openai_api import add_openai_routes
from isorag_pyg.server.page import page_router
from isorag_pyg.server.reloading import DISK_CHECK_S, Served, ServedIndex
from isorag_pyg.server.schema import (
    ERROR_RESPONSES,
    Answer,
    ErrorBody,
    ReloadBody,
    RequestError,
    RetrieveBody,
    checked_request,
    declare_api_key,
    error_response,
    retrieve_body_schema,
    validation_message,
)
from isorag_pyg.server.settings import ServerSettings
from isorag_pyg.version import __version__

log = logging.getLogger(__name__)

#: ``GET /health``'s status for each state of the index's folder (see :class:`~isorag_pyg.store.disk_check.DiskCheck`).
HEALTH_STATUS = {"ok": "ok", "stale": "stale", "changed": "degraded"}

#: The counters ``GET /health`` reports (see :class:`RetrievalEngine`).
STATS = ("requests", "questions", "batches", "encoder_calls", "retrieval_calls", "encode_seconds", "retrieval_seconds",
         "failed_requests", "largest_batch")


def create_app(index: ISORAGIndex, settings: ServerSettings = ServerSettings(), verify: bool = True, reader: Reader | None = None) -> FastAPI:
    """The server over a loaded index. The app owns a :class:`ServedIndex` (``app.state.served``:
    the current :class:`RetrievalEngine`, counters in ``/health``; reloaded from the directory
    the index was loaded from) and a :class:`MicroBatcher` feeding it, started and stopped with
    the app's lifespan (as is the watch: the files on disk checked every ``settings.watch_seconds``,
    or :data:`~isorag_pyg.server.reloading.DISK_CHECK_S`, and with ``watch_seconds`` a newly
    saved version served). A reloaded
    version keeps the encoder (query cache included) when its fingerprint is the same, and gets
    its own encoder behind a fresh query cache when it is not. ``reader`` answers ``POST /answer``
    and ``/v1/chat/completions`` (``None``: they answer 503, retrieval only); the app closes it
    when it stops."""

    def serving_encoder(encoder: TextEncoder) -> TextEncoder:
        return LRUQueryEncoder(encoder, settings.query_cache) if settings.query_cache else encoder

    index.encoder = serving_encoder(index.encoder)
    reloadable = index.origin is not None  # loaded from a directory (the app keeps no other reference to this version)
    served = ServedIndex(index.origin[0] if reloadable else "", RetrievalEngine(index), verify, serving_encoder)
    batcher: MicroBatcher[RetrievalRequest, Served] = MicroBatcher(served.run, settings.batch_window_ms / 1000, settings.max_batch,
                                                                   settings.max_pending)

    async def watch(seconds: float, reload: bool) -> None:
        """Every ``seconds``, check the files on disk (logged when that changes) and, with
        ``reload``, serve a newly saved version."""
        while True:
            await asyncio.sleep(seconds)
            try:
                await asyncio.to_thread(served.disk_state)
            except Exception as err:  # noqa: BLE001 - the check must not end the watch
                log.warning("index %s: its files could not be checked (%s)", served.directory, err)
            if not reload:
                continue
            try:
                if (outcome := await asyncio.to_thread(served.poll)) is not None and outcome["reloaded"]:
                    log.warning("index %s: serving version %s", served.directory, outcome["version"])
            except Exception as err:  # noqa: BLE001 - a bad new version: keep serving the current one
                log.warning("index %s: version %s not reloaded (%s); still serving version %d (opened again in %.0f s, at a newer save or on "
                            "POST /reload)", served.directory, served.refused_version, err, served.version, served.retry_in_s)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        watcher = None
        try:
            served.freeze()  # the index, the model, the modules: out of the collector's full collections
            batcher.start()
            if reloadable:
                watcher = asyncio.get_running_loop().create_task(watch(settings.watch_seconds or DISK_CHECK_S, settings.watch_seconds is not None))
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
            await batcher.close()
            served.unfreeze()
            if reader is not None:
                await asyncio.to_thread(reader.close)

    app = FastAPI(title="isorag", version=__version__, lifespan=lifespan, responses=ERROR_RESPONSES,
                  description="ISO-RAG retrieval with dynamic micro-batching.")
    latency = LatencyHistogram()  # answered retrieve requests, arrival at the handler to answer ready
    app.state.served, app.state.batcher, app.state.settings, app.state.latency = served, batcher, settings, latency
    app.state.gate = gate = ConnectionGate(settings.max_connections, settings.max_connections_per_client)  # isorag serve's protocol uses it
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(AccessGuard, allowed_hosts=settings.allowed_hosts, api_key=settings.api_key, routes=app.router.routes)  # outermost
    if settings.api_key is not None:
        app.openapi = declare_api_key(app.openapi, OPEN_PATHS)  # type: ignore[method-assign]

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, err: RequestValidationError) -> JSONResponse:
        return error_response(*validation_message(err))

    @app.post("/retrieve", response_model=list[Answer], responses={500: {"model": ErrorBody, "description": "a failure inside retrieval"}},
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": retrieve_body_schema(settings)}}}})
    async def retrieve(body: RetrieveBody) -> JSONResponse:
        """The top ``k`` passages for each question: a list with one ``isorag query --json``
        object per question, in order."""
        began = time.perf_counter()
        try:
            request = checked_request(body, settings)
            served_hits = await batcher.submit(request)
        except BatcherUnavailable as err:
            return error_response(503, str(err))
        except RequestError as err:  # the limits
            return error_response(422, str(err))
        except Exception as err:  # noqa: BLE001 - any other failure answers 500, the server keeps serving
            return error_response(500, f"retrieval failed: {type(err).__name__}: {err}")
        response = JSONResponse([answer_json(q, h) for q, h in zip(request.questions, served_hits.hits)],
                                headers={"X-Index-Version": str(served_hits.version)})
        latency.observe(time.perf_counter() - began)
        return response

    @app.post("/reload", responses={409: {"model": ErrorBody, "description": "a version that cannot be opened; the current one serves on"}})
    async def reload(_: ReloadBody) -> JSONResponse:
        """Serve the version of the index saved since (if any), asked with the body ``{}``:
        ``{"reloaded", "version", "passages"}``. Requests keep being answered meanwhile; the swap happens between batches.
        A version that cannot be opened is a 409, and the current one keeps serving."""
        if not reloadable:
            return error_response(409, "this server's index was not loaded from a directory: nothing to reload")
        try:
            return JSONResponse(await asyncio.to_thread(served.reload))
        except Exception as err:  # noqa: BLE001 - a version that cannot be opened: keep serving the current one
            return error_response(409, f"not reloaded, still serving version {served.version}: {err}")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness and counters: requests, questions, batches, encoder and retrieval calls and
        their seconds, failed requests, the largest batch; and ``latency``, the answered
        requests' latency inside the server since it started (histogram and p50 / p99 in ms);
        ``connections``: open and waiting now, accepted, refused, evicted and timed out since;
        ``disk``: whether the index's folder still holds the served version (``status`` is
        ``"stale"`` when a newer version was saved there, ``"degraded"`` when its files were
        changed in place: the served version is still answered, from memory)."""
        stats = {key: served.engine.stats[key] for key in STATS}
        disk = await asyncio.to_thread(served.disk_state)
        return {"status": HEALTH_STATUS[disk.state], "passages": len(served.index), "version": served.version, "queued": batcher.queued,
                "stats": stats, "latency": latency.to_dict(), "connections": gate.describe(), "disk": disk.to_dict()}

    @app.get("/info")
    async def info() -> dict[str, Any]:
        """The served version and passage count, the index's manifest (encoder, graph, f_θ, φ,
        knobs, counts), retrievers, settings and the reader's model (``None``: no reader)."""
        return {"version": served.version, "passages": len(served.index), "reloads": served.reloads, "index": served.index.info(),
                "retrievers": list(RETRIEVERS), "settings": settings.to_dict(), "reader": reader.name if reader is not None else None}

    add_answer_route(app, reader, batcher, settings)
    add_openai_routes(app, reader, batcher, settings)
    app.include_router(explain_router(served, settings))
    app.include_router(page_router())
    return app
