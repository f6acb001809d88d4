"""Who may call the server: the Host names it answers to, a bearer token, and no cross-site writes.

:class:`AccessGuard` is an ASGI middleware in front of every route, those added after
:func:`~isorag_pyg.server.app.create_app` included. In order:

1. ``Host`` must name one of the allowed hosts (by default the loopback names ``localhost``,
   ``127.0.0.1``, ``::1``; any port): a web page whose domain an attacker re-points at this
   machine (DNS rebinding) sends its own name and is refused (400).
2. With an API key, every path but ``/health`` needs ``Authorization: Bearer <key>`` (401
   otherwise); the comparison takes the same time whatever the key sent.
3. A request that changes state (any method but GET, HEAD and OPTIONS, on a route that takes
   it) must be ``application/json`` (415) and carry no ``Origin`` other than the server's own
   (403): a browser sends a cross-site form or ``text/plain`` POST without asking first, but
   never a cross-site JSON one.
"""
from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from isorag_pyg.server.schema import error_response

#: Paths that answer without the API key (liveness probes).
OPEN_PATHS = frozenset({"/health"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without port, brackets or a final dot, in lower case.

    Example:
        >>> host_name("[::1]:8000"), host_name("LocalHost.:80"), host_name("127.0.0.1")
        ('::1', 'localhost', '127.0.0.1')
    """
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


class AccessGuard:
    """ASGI middleware: the Host allow-list (``"*"``: any host), the API key (``None``: none
    needed) and the checks on state-changing requests (see the module). ``routes`` are the
    app's routes, read at each request, so that a method no route takes still gets the
    router's 405 rather than a 415."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str], api_key: str | None, routes: list[BaseRoute]):
        self.app, self.routes = app, routes
        self.allowed = frozenset(host_name(h) for h in allowed_hosts)
        self.key_digest = None if api_key is None else _digest(api_key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (refusal := self.refusal(scope)) is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> JSONResponse | None:
        """The error response for a request that may not pass, else ``None``."""
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if "*" not in self.allowed and host_name(host) not in self.allowed:
            return error_response(400, f"this server does not answer to host {host!r}; start it with --allowed-host NAME to allow that name")
        if self.key_digest is not None and scope["path"] not in OPEN_PATHS and not self._authorized(headers.get("authorization", "")):
            return error_response(401, "an API key is required: send the header 'Authorization: Bearer <key>'", {"WWW-Authenticate": "Bearer"})
        if scope["method"] in SAFE_METHODS or not self._routed(scope):
            return None
        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).netloc.lower() != host.lower():
            return error_response(403, f"cross-origin request from {origin!r} refused")
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            return error_response(415, f"{scope['method']} requests must be sent as application/json, got {media_type or 'no content type'!r}")
        return None

    def _authorized(self, authorization: str) -> bool:
        scheme, _, token = authorization.partition(" ")
        return hmac.compare_digest(_digest(token.strip()), self.key_digest) and scheme.lower() == "bearer"

    def _routed(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] == Match.FULL for route in self.routes)

