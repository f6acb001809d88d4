"""The HTTP part shared by the fake OpenAI-compatible servers: JSON POSTs on 127.0.0.1 answered
by the subclass's :meth:`FakeServer.respond`, in a daemon thread while the ``with`` block runs."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typing_extensions import Self


class FakeServer:
    """Subclasses set their own state, then call ``super().__init__()`` and implement
    :meth:`respond`."""

    def __init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                status, data = fake.respond(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def respond(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """The HTTP status and JSON body answering one request."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
