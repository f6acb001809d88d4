"""What the HTTP API takes and gives: ``POST /retrieve``'s body and its checks against the
server's limits, the answers, the one shape of every error (``{"detail": "<one line>"}``), and
how the OpenAPI schema states them (so that a client, or a fuzzer, generating requests from the
schema meets the same limits the server applies)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict

from isorag_pyg import defaults
from isorag_pyg.index import RETRIEVERS
from isorag_pyg.index.registry import check_retriever_name
from isorag_pyg.retrieval.types import check_questions
from isorag_pyg.server.engine import RetrievalRequest
from isorag_pyg.server.settings import ServerSettings


def _integral(value: Any) -> Any:
    """A JSON number without a fraction (``5.0``) as the integer it is; anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class RetrieveBody(BaseModel):
    """``POST /retrieve``'s body (strict types: ``"5"`` and ``2.5`` are not a ``k``, ``5.0`` is
    5, as JSON Schema's integers; unknown fields are errors)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    questions: list[str]
    k: Annotated[int, BeforeValidator(_integral)] = defaults.K
    retriever: str = defaults.RETRIEVER


class ReloadBody(BaseModel):
    """``POST /reload``'s body: ``{}`` (a JSON body, so that a browser cannot send it cross-site unasked)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class Passage(BaseModel):
    id: str
    title: str
    text: str
    score: float


class Answer(BaseModel):
    """One question's answer, exactly as ``isorag query --json`` prints it."""

    question: str
    results: list[Passage]


class ErrorBody(BaseModel):
    """Every error's body."""

    detail: str


#: The errors any route may answer (the access checks, the body limit, validation, overload),
#: stated once for the whole app so that routes added later state them too.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description} for status, description in (
        (400, "malformed JSON, or a Host this server does not answer to"), (401, "the API key is missing or wrong"),
        (403, "a cross-origin request that changes state"), (413, "a body over the size limit"),
        (415, "a request that changes state, not sent as application/json"), (422, "a request the limits or the index refuse"),
        (503, "the server is busy or stopping"))}

BODY_SHAPE = "the body must be a JSON object sent as application/json (see /docs)"


class RequestError(ValueError):
    """A request the limits or the index refuse (422)."""


def error_response(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """``{"detail": detail}`` with ``status``."""
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


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


#: A character that is not whitespace as ``str.strip`` sees it (a question must hold one), written
#: out: JSON Schema's ``\S`` follows JavaScript, for which U+001C-U+001F and U+0085 are not space.
NOT_SPACE = r"[^\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


def retrieve_body_schema(settings: ServerSettings) -> dict[str, Any]:
    """The JSON schema of the bodies :func:`checked_request` accepts under ``settings``: what the
    OpenAPI schema states for ``POST /retrieve`` (the model parses more loosely, so that a
    request outside the limits gets its own message)."""
    question = {"type": "string", "minLength": 1, "maxLength": settings.max_question_chars, "pattern": NOT_SPACE}
    return {"title": "RetrieveBody", "type": "object", "additionalProperties": False, "required": ["questions"], "properties": {
        "questions": {"type": "array", "items": question, "minItems": 1, "maxItems": settings.max_questions},
        "k": {"type": "integer", "minimum": 1, "maximum": settings.max_k, "default": defaults.K},
        "retriever": {"type": "string", "enum": list(RETRIEVERS), "default": defaults.RETRIEVER}}}


def declare_api_key(openapi: Callable[[], dict[str, Any]], open_paths: Iterable[str]) -> Callable[[], dict[str, Any]]:
    """``openapi`` (an app's schema function) stating the bearer token every operation needs but
    those on ``open_paths``."""
    def with_key() -> dict[str, Any]:
        schema = openapi()
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["apiKey"] = {"type": "http", "scheme": "bearer"}
        schema["security"] = [{"apiKey": []}]
        for path in open_paths:
            for operation in schema.get("paths", {}).get(path, {}).values():
                operation["security"] = []
        return schema

    return with_key


def validation_message(err: RequestValidationError) -> tuple[int, str]:
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
