"""A small OpenAI-compatible (chat) completions server on 127.0.0.1 with scripted failures."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from typing_extensions import Self


def question_of(prompt: str) -> str:
    """The text after the last ``Question: `` of a QA prompt, up to its line end."""
    return prompt.rsplit("Question: ", 1)[-1].split("\n")[0]


class FakeLLM:
    """Each request is named by ``key(prompt)`` (default: its question). ``failures[key] =
    ["429", "500", "timeout", "malformed", ...]`` are served in order before a real answer;
    ``answers[key]`` is the answer (default ``"answer to <key>"``). Chat requests get a chat
    completion, prompt strings (``/completions``) a text completion."""

    def __init__(self, failures: dict[str, list[str]] | None = None, answers: dict[str, str] | None = None, delay: float = 2.0,
                 key: Callable[[str], str] = question_of):
        self.failures = {k: list(v) for k, v in (failures or {}).items()}
        self.answers = answers or {}
        self.delay = delay
        self.key = key
        self.requests: Counter[str] = Counter()
        self.completions: Counter[str] = Counter()
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                chat = "messages" in body
                user = body["messages"][-1]["content"] if chat else body["prompt"]
                question = fake.key(user)
                with fake.lock:
                    fake.requests[question] += 1
                    todo = fake.failures.get(question, [])
                    failure = todo.pop(0) if todo else None
                if failure == "timeout":
                    time.sleep(fake.delay)
                    return self._send(200, b"{}")
                if failure in ("429", "500"):
                    return self._send(int(failure), json.dumps({"error": {"message": failure}}).encode())
                if failure == "malformed":
                    return self._send(200, b"{this is not json")
                with fake.lock:
                    fake.completions[question] += 1
                answer = fake.answers.get(question, f"answer to {question}")
                choice = {"message": {"role": "assistant", "content": answer}} if chat else {"text": answer, "logprobs": None}
                payload = {
                    "id": "cmpl-1", "object": "chat.completion" if chat else "text_completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", **choice}],
                    "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 3, "total_tokens": len(user.split()) + 3},
                }
                self._send(200, json.dumps(payload).encode())

            def _send(self, status: int, data: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
