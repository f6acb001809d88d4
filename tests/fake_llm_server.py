"""A small OpenAI-compatible (chat) completions server on 127.0.0.1 with scripted failures."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from fake_http import FakeServer


def question_of(prompt: str) -> str:
    """The text after the last ``Question: `` of a QA prompt, up to its line end."""
    return prompt.rsplit("Question: ", 1)[-1].split("\n")[0]


class FakeLLM(FakeServer):
    """Each request is named by ``key(prompt)`` (default: its question). ``failures[key] =
    ["429", "500", "timeout", "malformed", ...]`` are served in order before a real answer;
    ``answers[key]`` is the answer (default ``"answer to <key>"``). Chat requests get a chat
    completion, prompt strings (``/completions``) a text completion; ``"stream": true`` gets the
    answer word by word as server-sent events, ``piece_delay`` seconds apart (``streamed``: the
    pieces sent; ``disconnects``: streams the client closed before their end). ``seen`` keeps
    every request body."""

    def __init__(self, failures: dict[str, list[str]] | None = None, answers: dict[str, str] | None = None, delay: float = 2.0,
                 key: Callable[[str], str] = question_of, piece_delay: float = 0.0):
        self.failures = {k: list(v) for k, v in (failures or {}).items()}
        self.answers = answers or {}
        self.delay = delay
        self.key = key
        self.requests: Counter[str] = Counter()
        self.completions: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.piece_delay, self.streamed = piece_delay, 0
        self.seen: list[dict[str, Any]] = []
        super().__init__()

    def _events(self, body: dict[str, Any], answer: str, chat: bool) -> Iterator[bytes]:
        words = answer.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            choice = {"delta": {"content": piece}} if chat else {"text": piece}
            chunk = {"id": "cmpl-1", "object": "chat.completion.chunk" if chat else "text_completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": None, **choice}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            with self.lock:
                self.streamed += 1
            time.sleep(self.piece_delay)
        yield b"data: [DONE]\n\n"

    def respond(self, body: dict[str, Any]) -> tuple[int, bytes | Iterator[bytes]]:
        self.seen.append(body)
        chat = "messages" in body
        user = body["messages"][-1]["content"] if chat else body["prompt"]
        question = self.key(user)
        with self.lock:
            self.requests[question] += 1
            todo = self.failures.get(question, [])
            failure = todo.pop(0) if todo else None
        if failure == "timeout":
            time.sleep(self.delay)
            return 200, b"{}"
        if failure in ("429", "500"):
            return int(failure), json.dumps({"error": {"message": failure}}).encode()
        if failure == "malformed":
            return 200, b"{this is not json"
        with self.lock:
            self.completions[question] += 1
        answer = self.answers.get(question, f"answer to {question}")
        if body.get("stream"):
            return 200, self._events(body, answer, chat)
        choice = {"message": {"role": "assistant", "content": answer}} if chat else {"text": answer, "logprobs": None}
        payload = {
            "id": "cmpl-1", "object": "chat.completion" if chat else "text_completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", **choice}],
            "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 3, "total_tokens": len(user.split()) + 3},
        }
        return 200, json.dumps(payload).encode()
