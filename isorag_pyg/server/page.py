"""The web page at ``GET /``: ask a question, read the streamed answer with its citations and the
retrieved passages, and see ISO-RAG's local graph for it (``POST /explain``). Its three files are
package data (``static/``), served from memory: the page needs no internet, and its
Content-Security-Policy lets it load nothing from anywhere else."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

#: The page's files under ``/static/`` and their media types.
ASSETS = {"page.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8"}
#: The paths the page is served on. They hold no data, so they answer without the API key (a
#: browser cannot send one when it opens a page); the page's own requests carry it.
PAGE_PATHS = frozenset({"/", *(f"/static/{name}" for name in ASSETS)})
#: Scripts, styles and requests from this server only; no frames, no forms sent elsewhere.
CSP = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"


def static_file(name: str) -> bytes:
    """The packaged file ``static/<name>``."""
    return (resources.files(__package__) / "static" / name).read_bytes()


def page_router() -> APIRouter:
    """``GET /`` and its files, left out of the OpenAPI schema (they are not API)."""
    router = APIRouter(include_in_schema=False)
    headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
    files = {"/": (static_file("index.html"), "text/html; charset=utf-8")}
    files |= {f"/static/{name}": (static_file(name), media_type) for name, media_type in ASSETS.items()}

    def route(content: bytes, media_type: str) -> Callable[[], Awaitable[Response]]:
        async def serve() -> Response:
            return Response(content, media_type=media_type, headers=headers)

        return serve

    for path, (content, media_type) in files.items():
        router.add_api_route(path, route(content, media_type), methods=["GET"])
    return router
