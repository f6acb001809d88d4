"""A small OpenAI-compatible (chat) completions server on 127.0.0.1 with scripted failures."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from fake_http import FakeServer


def question_of(prompt: str) -> str:
    """The text after the last ``Question: `` of a QA prompt, up to its line end."""
    return prompt.rsplit("Question: ", 1)[-1].split("\n")[0]


class FakeLLM(FakeServer):
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
        super().__init__()

    def respond(self, body: dict[str, Any]) -> tuple[int, bytes]:
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
        choice = {"message": {"role": "assistant", "content": answer}} if chat else {"text": answer, "logprobs": None}
        payload = {
            "id": "cmpl-1", "object": "chat.completion" if chat else "text_completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", **choice}],
            "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 3, "total_tokens": len(user.split()) + 3},
        }
        return 200, json.dumps(payload).encode()
