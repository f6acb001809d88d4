"""The HTTP API (FastAPI): ``POST /retrieve``, ``POST /reload``, ``GET /health``, ``GET /info``.

Every bad request gets a 4xx whose JSON body is ``{"detail": "<one-line message>"}``:
malformed JSON 400, a body over the size limit 413, anything else wrong with the request 422;
an overloaded or stopping server answers 503. Answers carry the index version that produced them
in the ``X-Index-Version`` header.
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
from pydantic import BaseModel, ConfigDict
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isorag_pyg import defaults
from isorag_pyg.encoders import TextEncoder
from isorag_pyg.encoders.query_cache import LRUQueryEncoder
from isorag_pyg.index import RETRIEVERS, ISORAGIndex
from isorag_pyg.index.registry import check_retriever_name
from isorag_pyg.index.results import answer_json
from isorag_pyg.retrieval.types import check_questions
from isorag_pyg.server.batcher import BatcherUnavailable, MicroBatcher
from isorag_pyg.server.connection_gate import ConnectionGate
from isorag_pyg.server.engine import RetrievalEngine, RetrievalRequest
from isorag_pyg.server.latency import LatencyHistogram
from isorag_pyg.server.reloading import Served, ServedIndex
from isorag_pyg.server.settings import ServerSettings
from isorag_pyg.version import __version__

log = logging.getLogger(__name__)

#: The counters ``GET /health`` reports (see :class:`RetrievalEngine`).
STATS = ("requests", "questions", "batches", "encoder_calls", "retrieval_calls", "encode_seconds", "retrieval_seconds",
         "failed_requests", "largest_batch")


class RetrieveBody(BaseModel):
    """``POST /retrieve``'s body (strict types: ``"5"`` is not a ``k``; unknown fields are errors)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    questions: list[str]
    k: int = defaults.K
    retriever: str = defaults.RETRIEVER


class Passage(BaseModel):
    id: str
    title: str
    text: str
    score: float


class Answer(BaseModel):
    """One question's answer, exactly as ``isorag query --json`` prints it."""

    question: str
    results: list[Passage]


BODY_SHAPE = 'the body must be a JSON object {"questions": [...], "k": 5, "retriever": "iso"} sent as application/json'


class RequestError(ValueError):
    """A request the limits or the index refuse (422)."""


def checked_request(body: RetrieveBody, settings: ServerSettings) -> RetrievalRequest:
    """``body`` as a :class:`RetrievalRequest`, or :class:`RequestError` naming what is wrong."""
    try:
        check_questions(body.questions)
        check_retriever_name(body.retriever)
    except ValueError as err:
        raise RequestError(str(err)) from None
    if len(body.questions) > settings.max_questions:
        raise RequestError(f"at most {settings.max_questions} questions per request, got {len(body.questions)}")
    for i, question in enumerate(body.questions):
        if len(question) > settings.max_question_chars:
            raise RequestError(f"question {i} has {len(question)} characters; the limit is {settings.max_question_chars}")
    if not 1 <= body.k <= settings.max_k:
        raise RequestError(f"k must lie between 1 and {settings.max_k}, got {body.k}")
    return RetrievalRequest(tuple(body.questions), body.k, body.retriever)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


class BodyLimit:
    """ASGI middleware: request bodies over ``max_bytes`` get 413 (by their declared length
    before anything is read, or as soon as the streamed body passes the limit)."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = _error(413, f"request body over the limit of {self.max_bytes} bytes")
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await too_large(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()

        await self.app(scope, replay, send)


def _validation_message(err: RequestValidationError) -> tuple[int, str]:
    """(status, one line) for FastAPI's validation errors: 400 for malformed JSON, else 422."""
    errors = err.errors()
    for e in errors:
        if e.get("type") == "json_invalid":
            return 400, f"malformed JSON: {e.get('ctx', {}).get('error', e.get('msg', 'invalid JSON'))}"
    parts = []
    for e in errors:
        where = ".".join(str(part) for part in e.get("loc", ()) if part != "body")
        parts.append(f"{where}: {e.get('msg', 'invalid')}" if where else BODY_SHAPE)
    return 422, "; ".join(dict.fromkeys(parts))


def create_app(index: ISORAGIndex, settings: ServerSettings = ServerSettings(), verify: bool = True) -> FastAPI:
    """The server over a loaded index. The app owns a :class:`ServedIndex` (``app.state.served``:
    the current :class:`RetrievalEngine`, counters in ``/health``; reloaded from the directory
    the index was loaded from) and a :class:`MicroBatcher` feeding it, started and stopped with
    the app's lifespan (as is the manifest watch, with ``settings.watch_seconds``). A reloaded
    version keeps the encoder (query cache included) when its fingerprint is the same, and gets
    its own encoder behind a fresh query cache when it is not."""

    def serving_encoder(encoder: TextEncoder) -> TextEncoder:
        return LRUQueryEncoder(encoder, settings.query_cache) if settings.query_cache else encoder

    index.encoder = serving_encoder(index.encoder)
    reloadable = index.origin is not None  # loaded from a directory (the app keeps no other reference to this version)
    served = ServedIndex(index.origin[0] if reloadable else "", RetrievalEngine(index), verify, serving_encoder)
    batcher: MicroBatcher[RetrievalRequest, Served] = MicroBatcher(served.run, settings.batch_window_ms / 1000, settings.max_batch,
                                                                   settings.max_pending)

    async def watch(seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
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
            if settings.watch_seconds is not None and reloadable:
                watcher = asyncio.get_running_loop().create_task(watch(settings.watch_seconds))
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
            await batcher.close()
            served.unfreeze()

    app = FastAPI(title="isorag", version=__version__, lifespan=lifespan,
                  description="ISO-RAG retrieval with dynamic micro-batching.")
    latency = LatencyHistogram()  # answered retrieve requests, arrival at the handler to answer ready
    app.state.served, app.state.batcher, app.state.settings, app.state.latency = served, batcher, settings, latency
    app.state.gate = gate = ConnectionGate(settings.max_connections, settings.max_connections_per_client)  # isorag serve's protocol uses it
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, err: RequestValidationError) -> JSONResponse:
        return _error(*_validation_message(err))

    @app.post("/retrieve", response_model=list[Answer], responses={400: {}, 413: {}, 422: {}, 503: {}})
    async def retrieve(body: RetrieveBody) -> JSONResponse:
        """The top ``k`` passages for each question: a list with one ``isorag query --json``
        object per question, in order."""
        began = time.perf_counter()
        try:
            request = checked_request(body, settings)
            served_hits = await batcher.submit(request)
        except BatcherUnavailable as err:
            return _error(503, str(err))
        except RequestError as err:  # the limits
            return _error(422, str(err))
        except Exception as err:  # noqa: BLE001 - any other failure answers 500, the server keeps serving
            return _error(500, f"retrieval failed: {type(err).__name__}: {err}")
        response = JSONResponse([answer_json(q, h) for q, h in zip(request.questions, served_hits.hits)],
                                headers={"X-Index-Version": str(served_hits.version)})
        latency.observe(time.perf_counter() - began)
        return response

    @app.post("/reload", responses={409: {}})
    async def reload() -> JSONResponse:
        """Serve the version of the index saved since (if any): ``{"reloaded", "version",
        "passages"}``. Requests keep being answered meanwhile; the swap happens between batches.
        A version that cannot be opened is a 409, and the current one keeps serving."""
        if not reloadable:
            return _error(409, "this server's index was not loaded from a directory: nothing to reload")
        try:
            return JSONResponse(await asyncio.to_thread(served.reload))
        except Exception as err:  # noqa: BLE001 - a version that cannot be opened: keep serving the current one
            return _error(409, f"not reloaded, still serving version {served.version}: {err}")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness and counters: requests, questions, batches, encoder and retrieval calls and
        their seconds, failed requests, the largest batch; and ``latency``, the answered
        requests' latency inside the server since it started (histogram and p50 / p99 in ms); and
        ``connections``: open and waiting now, accepted, refused, evicted and timed out since."""
        stats = {key: served.engine.stats[key] for key in STATS}
        return {"status": "ok", "passages": len(served.index), "version": served.version, "queued": batcher.queued, "stats": stats,
                "latency": latency.to_dict(), "connections": gate.describe()}

    @app.get("/info")
    async def info() -> dict[str, Any]:
        """The served version and passage count, the index's manifest (encoder, graph, f_θ, φ,
        knobs, counts), retrievers and settings."""
        return {"version": served.version, "passages": len(served.index), "reloads": served.reloads, "index": served.index.info(),
                "retrievers": list(RETRIEVERS), "settings": settings.to_dict()}

    return app
