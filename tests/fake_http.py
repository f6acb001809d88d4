"""The HTTP part shared by the fake OpenAI-compatible servers: JSON POSTs on 127.0.0.1 answered
by the subclass's :meth:`FakeServer.respond`, in a daemon thread while the ``with`` block runs; an
answer given as an iterator of bytes is streamed as server-sent events, each written as it comes."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typing_extensions import Self


class FakeServer:
    """Subclasses set their own state, then call ``super().__init__()`` and implement
    :meth:`respond`."""

    def __init__(self) -> None:
        fake = self
        self.disconnects = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                status, data = fake.respond(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                if not isinstance(data, bytes):
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    fake.stream(self.wfile, data)
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def respond(self, body: dict[str, Any]) -> tuple[int, bytes | Iterator[bytes]]:
        """The HTTP status and JSON body (or the events of a stream) answering one request."""
        raise NotImplementedError

    def stream(self, out: Any, events: Iterator[bytes]) -> None:
        """Write each event as it comes; a client that went away ends the stream (counted in ``disconnects``)."""
        try:
            for event in events:
                out.write(event)
                out.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.disconnects += 1

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
