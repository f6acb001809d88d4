"""Answer generators: any OpenAI-compatible chat server, or a local transformers model."""
from __future__ import annotations

import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from isorag_pyg.qa.cache import AnswerCache, request_key

log = logging.getLogger(__name__)


class GeneratorError(RuntimeError):
    """The generator could not answer (unreachable endpoint, retries exhausted, bad response)."""


class Generator(Protocol):
    token_counter: str

    def generate(self, requests: list[list[dict[str, str]]]) -> list[dict[str, Any]]: ...


class OpenAIChatGenerator:
    """Chat completions from an OpenAI-compatible server (vLLM, Ollama, llama.cpp, hosted APIs).

    The API key is read from the environment variable ``api_key_env`` and never logged or
    written. Requests run ``concurrency`` at a time; 429, 5xx, timeouts, connection errors and
    malformed bodies are retried ``max_retries`` times with exponential backoff and jitter.
    Every answer is appended to the ``cache_path`` JSONL file as it arrives, so a rerun (or a
    resumed, interrupted run) sends only the requests that have no answer yet.

    Prompt tokens are the server's own count (``usage.prompt_tokens``).
    """

    token_counter = "server usage.prompt_tokens (the generator's tokenizer)"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 5,
        timeout: float = 60.0,
        backoff: float = 1.0,
        temperature: float = 0.0,
        max_tokens: int = 64,
        cache_path: str | Path | None = None,
    ):
        import openai

        self._openai = openai
        self.base_url, self.model = base_url, model
        self.client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "EMPTY", timeout=timeout, max_retries=0)
        self.concurrency, self.max_retries, self.backoff = concurrency, max_retries, backoff
        self.params = {"temperature": temperature, "max_tokens": max_tokens}
        self.cache = AnswerCache(cache_path)
        self.calls = 0

    def _retryable(self, err: Exception) -> bool:
        o = self._openai
        if isinstance(err, (o.RateLimitError, o.InternalServerError, o.APITimeoutError, o.APIConnectionError, o.APIResponseValidationError)):
            return True
        if isinstance(err, o.APIStatusError):
            return err.status_code == 429 or err.status_code >= 500
        return isinstance(err, (ValueError, KeyError, AttributeError, IndexError, TypeError))  # malformed body

    def _ask(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        key = request_key(self.model, messages, self.params)
        if (hit := self.cache.get(key)) is not None:
            return hit
        for attempt in range(self.max_retries + 1):
            try:
                self.calls += 1
                response = self.client.chat.completions.create(model=self.model, messages=messages, **self.params)
                answer = response.choices[0].message.content
                if not isinstance(answer, str):
                    raise ValueError("response has no message content")
                usage = getattr(response, "usage", None)
                record = {"key": key, "answer": answer.strip(), "prompt_tokens": getattr(usage, "prompt_tokens", None)}
                self.cache.put(record)
                return record
            except Exception as err:  # noqa: BLE001 - classified below
                if not self._retryable(err) or attempt == self.max_retries:
                    if isinstance(err, self._openai.APIConnectionError):
                        raise GeneratorError(f"cannot reach the generator at {self.base_url}: {err}") from err
                    raise GeneratorError(f"generation failed after {attempt + 1} attempt(s): {type(err).__name__}: {err}") from err
                delay = self.backoff * 2**attempt * (0.5 + random.random() / 2)
                log.info("retrying after %s (attempt %d/%d, %.2fs)", type(err).__name__, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def generate(self, requests: list[list[dict[str, str]]]) -> list[dict[str, Any]]:
        """One record (``answer``, ``prompt_tokens``) per request, in request order."""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(tqdm(pool.map(self._ask, requests), total=len(requests), desc="generating", leave=False))


class TransformersGenerator:
    """A local causal LM by path (``transformers``), greedy decoding, prompt tokens counted with
    its own tokenizer."""

    token_counter = "the local model's tokenizer"

    def __init__(self, model_path: str, max_new_tokens: int = 64, device: str | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not Path(model_path).exists():
            raise GeneratorError(f"no local model at {model_path}")
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path)
        if device:
            self.model.to(device)
        self.max_new_tokens = max_new_tokens

    def generate(self, requests: list[list[dict[str, str]]]) -> list[dict[str, Any]]:
        out = []
        for messages in tqdm(requests, desc="generating", leave=False):
            if self.tokenizer.chat_template:
                ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
            else:
                ids = self.tokenizer("\n\n".join(m["content"] for m in messages), return_tensors="pt").input_ids
            ids = ids.to(self.model.device)
            generated = self.model.generate(ids, max_new_tokens=self.max_new_tokens, do_sample=False)
            answer = self.tokenizer.decode(generated[0, ids.shape[1]:], skip_special_tokens=True)
            out.append({"answer": answer.strip(), "prompt_tokens": int(ids.shape[1])})
        return out
