"""The OpenAI-compatible face of the server: ``GET /v1/models`` and ``POST /v1/chat/completions``
(whole or streamed), so that any OpenAI client, chat UI or agent framework can use an ISO-RAG
index as a model.

The last user message (with text) is the question (retrieved for, micro-batched with every other request);
earlier turns go to the reader as the conversation. The answer keeps its inline ``[n]`` markers;
the body carries ``citations`` (``[{"n", "id", "title", "by"}]``, as in ``POST /answer``) beside ``choices``, as does the last
streamed chunk. The model ``isorag-<name>`` retrieves with the retriever ``name``, any other
model name (``isorag``, or whatever a client sends) with the default one; the extra fields ``k``
and ``retriever`` override them. A failed reader is
a 502/504 (``{"detail"}``), or mid-stream a chunk ``{"error": {"message", "code"}}``.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict

from isorag_pyg import defaults
from isorag_pyg.index import RETRIEVERS
from isorag_pyg.qa.answering import Answering
from isorag_pyg.qa.reader_spec import Reader
from isorag_pyg.server.answers import (
    EVENT_SCHEMA,
    NO_READER,
    EventStream,
    one_line,
    reader_status,
    retrieval_error,
    retrieve_one,
    run_answering,
)
from isorag_pyg.server.batcher import MicroBatcher
from isorag_pyg.server.engine import RetrievalRequest
from isorag_pyg.server.reloading import Served
from isorag_pyg.server.schema import NOT_SPACE, ErrorBody, error_response, integral
from isorag_pyg.server.settings import ServerSettings

#: The model name that retrieves with the default retriever.
MODEL = "isorag"


def models() -> dict[str, str]:
    """Model name -> retriever: ``isorag`` and ``isorag-<retriever>``."""
    return {MODEL: defaults.RETRIEVER, **{f"{MODEL}-{name}": name for name in RETRIEVERS}}


ROLES = ("system", "user", "assistant", "developer", "tool")


class Message(BaseModel):
    model_config = ConfigDict(strict=True)

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str


class ChatBody(BaseModel):
    """An OpenAI chat-completions body (text messages); other fields (``temperature``...) are
    accepted and left to the server's reader settings."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str
    messages: list[Message]
    stream: bool = False
    k: Annotated[int, BeforeValidator(integral)] = defaults.K
    retriever: str | None = None


def chat_body_schema(settings: ServerSettings) -> dict[str, Any]:
    """The JSON schema of the chat bodies the server accepts under ``settings`` (a user message
    with text is required: the last one is the question)."""
    user = {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"const": "user"}, "content": {"type": "string", "maxLength": settings.max_question_chars}}}
    other = {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"enum": [role for role in ROLES if role != "user"]}, "content": {"type": "string"}}}
    asked = {**user, "properties": {**user["properties"], "content": {**user["properties"]["content"], "minLength": 1, "pattern": NOT_SPACE}}}
    return {"title": "ChatBody", "type": "object", "required": ["model", "messages"], "properties": {
        "model": {"type": "string", "description": "isorag-<retriever> picks the retriever; any other name the default one"},
        "messages": {"type": "array", "minItems": 1, "items": {"anyOf": [user, other]}, "contains": asked},
        "stream": {"type": "boolean", "default": False},
        "k": {"type": "integer", "minimum": 1, "maximum": settings.max_k, "default": defaults.K},
        "retriever": {"anyOf": [{"type": "string", "enum": list(RETRIEVERS)}, {"type": "null"}], "default": None}}}


def _question(body: ChatBody, settings: ServerSettings) -> tuple[str, list[dict[str, str]]]:
    """(the last user message with text, the user and assistant turns before it); ``ValueError``
    for a body :func:`chat_body_schema` refuses."""
    for i, m in enumerate(body.messages):
        if m.role == "user" and len(m.content) > settings.max_question_chars:
            raise ValueError(f"message {i} has {len(m.content)} characters; the limit is {settings.max_question_chars}")
    asked = [i for i, m in enumerate(body.messages) if m.role == "user" and m.content.strip()]
    if not asked:
        raise ValueError("no user message with a question")
    turns = [{"role": m.role, "content": m.content} for m in body.messages[:asked[-1]] if m.role in ("user", "assistant")]
    return body.messages[asked[-1]].content, turns


def _completion(reply_id: str, model: str, created: int, result: dict[str, Any]) -> dict[str, Any]:
    timings = result["timings"]
    prompt, completion = timings.get("prompt_tokens") or 0, timings.get("completion_tokens") or 0
    return {"id": reply_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result["answer"]}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
            "citations": result["citations"]}


def _chunk(reply_id: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    body = {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def add_openai_routes(app: FastAPI, reader: Reader | None, batcher: MicroBatcher[RetrievalRequest, Served], settings: ServerSettings) -> None:
    """``GET /v1/models`` and ``POST /v1/chat/completions`` over ``reader``, on ``app`` itself."""
    failures = {status: {"model": ErrorBody, "description": text} for status, text in (
        (500, "a failure inside retrieval"),
        (502, "the reader failed: unreachable, refused or answered garbage"), (504, "the reader did not answer in time"))}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        """The models this server answers as: ``isorag`` and ``isorag-<retriever>``."""
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "isorag"} for name in models()]}

    @app.post("/v1/chat/completions", responses={200: {"description": "a chat completion (JSON), or its chunks (text/event-stream)",
                                                       "content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}, **failures},
                 openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": chat_body_schema(settings)}}}})
    async def chat_completions(body: ChatBody) -> Response:
        """An OpenAI chat completion answering the last user message from the index, with
        ``citations`` beside ``choices`` (and in the last streamed chunk)."""
        try:
            question, history = _question(body, settings)
        except ValueError as err:
            return error_response(422, str(err))
        retriever = body.retriever if body.retriever is not None else models().get(body.model, defaults.RETRIEVER)
        try:
            hits, version, retrieval_s = await retrieve_one(batcher, question, body.k, retriever, settings)
        except Exception as err:  # noqa: BLE001 - each a 4xx/5xx; the server keeps serving
            return retrieval_error(err)
        if reader is None:
            return error_response(503, NO_READER)
        answering = Answering(reader, question, hits, retrieval_s, history)
        reply_id, created, headers = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), {"X-Index-Version": str(version)}
        if body.stream:
            return EventStream(_chunks(answering, reply_id, body.model, created), headers=headers)
        async for kind, value in run_answering(answering):
            if kind == "done":
                return JSONResponse(_completion(reply_id, body.model, created, value), headers=headers)
            if kind == "error":
                return error_response(reader_status(value), one_line(value), headers)
        raise AssertionError("unreachable: run_answering ends with done or error")


async def _chunks(answering: Answering, reply_id: str, model: str, created: int) -> AsyncIterator[str]:
    """The streamed chat completion: the role, the pieces, a last chunk with ``citations``, ``[DONE]``."""
    yield _chunk(reply_id, model, created, {"role": "assistant", "content": ""})
    events = run_answering(answering)
    try:
        async for kind, value in events:
            if kind == "token":
                yield _chunk(reply_id, model, created, {"content": value})
            elif kind == "done":
                yield _chunk(reply_id, model, created, {}, "stop", citations=value["citations"])
            else:
                yield f"data: {json.dumps({'error': {'message': one_line(value), 'code': reader_status(value)}})}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        await events.aclose()
