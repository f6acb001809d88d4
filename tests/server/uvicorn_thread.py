"""An ASGI app served by uvicorn in a thread of the test process, through the protocol and the
connection gate ``isorag serve`` uses (fast: no index, no subprocess)."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from isorag_pyg.server.connection_gate import ConnectionGate
from isorag_pyg.server.protocol import guarded_protocol


async def echo_app(scope, receive, send) -> None:
    """Answers every request ``200 {"ok": true}`` once its body has arrived."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok": true}'})


@contextlib.contextmanager
def serving(app, gate: ConnectionGate | None = None, read_timeout: float = 1.0) -> Iterator[tuple[str, int]]:
    """(host, port) of ``app`` served until the block ends."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    protocol = guarded_protocol(AutoHTTPProtocol, read_timeout, gate or ConnectionGate(64, 64))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", http=protocol, backlog=4096))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
