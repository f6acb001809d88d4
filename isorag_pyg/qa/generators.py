"""Answer generators: any OpenAI-compatible server (chat or completions), or a local transformers
model (a folder or a GGUF file)."""
from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Protocol

from isorag_pyg.plugins import Registry
from isorag_pyg.progress import progress
from isorag_pyg.qa.answer_cache import AnswerCache, request_key
from isorag_pyg.qa.prompt import Request, first_answer

log = logging.getLogger(__name__)


class GeneratorError(RuntimeError):
    """The generator could not answer (unreachable endpoint, retries exhausted, bad response)."""


class ReaderTimeout(GeneratorError):
    """The generator did not answer within its timeout."""


class ReaderDied(GeneratorError):
    """The generator's process (one the reader started) is gone."""


class Generator(Protocol):
    token_counter: str

    def generate(self, requests: list[Request]) -> list[dict[str, Any]]: ...


class OpenAIChatGenerator:
    """Answers from an OpenAI-compatible server (vLLM, Ollama, llama.cpp, hosted APIs): chat
    completions for chat messages, plain completions for a prompt string (a base model).

    The API key is read from the environment variable ``api_key_env`` and never logged or
    written. Requests run ``concurrency`` at a time; 429, 5xx, timeouts, connection errors and
    malformed bodies are retried ``max_retries`` times with exponential backoff and jitter.
    Every answer is appended to the ``cache_path`` JSONL file as it arrives, so a rerun (or a
    resumed, interrupted run) sends only the requests that have no answer yet.

    Prompt tokens are the server's own count (``usage.prompt_tokens``). ``stop`` strings end
    the generation (sent to the server, and applied again to its text). ``diagnose``: for a
    server this process started, says why it is gone (``None`` while it runs); a request that
    fails without an HTTP answer asks it, and fails at once with that reason (:class:`ReaderDied`).
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
        stop: list[str] | None = None,
        diagnose: Callable[[], str | None] | None = None,
    ):
        import openai

        self._openai = openai
        self.base_url, self.model = base_url, model
        self.client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "EMPTY", timeout=timeout, max_retries=0)
        self.concurrency, self.max_retries, self.backoff = concurrency, max_retries, backoff
        self.params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
        if stop:
            self.params["stop"] = list(stop)
        self.cache = AnswerCache(cache_path)
        self.calls = 0
        self.diagnose = diagnose

    def _retryable(self, err: Exception) -> bool:
        o = self._openai
        if isinstance(err, (o.RateLimitError, o.InternalServerError, o.APITimeoutError, o.APIConnectionError, o.APIResponseValidationError)):
            return True
        if isinstance(err, o.APIStatusError):
            return err.status_code == 429 or err.status_code >= 500
        return isinstance(err, (ValueError, KeyError, AttributeError, IndexError, TypeError))  # malformed body

    def _death(self, err: Exception) -> str | None:
        """Why the server is gone, when ``err`` came without an HTTP answer and ``diagnose`` knows
        (it waits a moment for a dying process to end)."""
        if self.diagnose is None or isinstance(err, (self._openai.APITimeoutError, self._openai.APIStatusError)):
            return None
        return self.diagnose()

    def _failure(self, err: Exception, attempts: int) -> GeneratorError:
        """The error a failed request raises: :class:`ReaderDied` when the server this process
        started is gone, :class:`ReaderTimeout` for a timeout, else :class:`GeneratorError`, one line."""
        if (reason := self._death(err)) is not None:
            return ReaderDied(f"the reader died: {reason}")
        if isinstance(err, self._openai.APITimeoutError):
            return ReaderTimeout(f"the generator at {self.base_url} did not answer within {self.client.timeout} s")
        if isinstance(err, self._openai.APIConnectionError):
            return GeneratorError(f"cannot reach the generator at {self.base_url}: {err}")
        return GeneratorError(f"generation failed after {attempts} attempt(s): {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")

    def stream(self, request: Request) -> AnswerStream:
        """The answer to one request as the server generates it (one attempt, no cache):
        iterate the :class:`AnswerStream` for its text pieces."""
        return AnswerStream(self, request)

    def _complete(self, request: Request) -> tuple[Any, Any]:
        """One call: (response, its generated text)."""
        if isinstance(request, str):
            response = self.client.completions.create(model=self.model, prompt=request, **self.params)
            return response, response.choices[0].text
        response = self.client.chat.completions.create(model=self.model, messages=request, **self.params)
        return response, response.choices[0].message.content

    def _ask(self, request: Request) -> dict[str, Any]:
        key = request_key(self.model, request, self.params)
        if (hit := self.cache.get(key)) is not None:
            return hit
        for attempt in range(self.max_retries + 1):
            try:
                self.calls += 1
                response, answer = self._complete(request)
                if not isinstance(answer, str):
                    raise TypeError("response has no generated text")
                usage = getattr(response, "usage", None)
                record = {"key": key, "answer": first_answer(answer, self.params.get("stop")), "prompt_tokens": getattr(usage, "prompt_tokens", None)}
                self.cache.put(record)
                return record
            except Exception as err:
                if not self._retryable(err) or attempt == self.max_retries or self._death(err) is not None:
                    raise self._failure(err, attempt + 1) from err
                delay = self.backoff * 2**attempt * (0.5 + random.random() / 2)
                log.info("retrying after %s (attempt %d/%d, %.2fs)", type(err).__name__, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def generate(self, requests: list[Request], desc: str = "generating") -> list[dict[str, Any]]:
        """One record (``answer``, ``prompt_tokens``) per request, in request order. The first
        request that fails for good raises at once: requests not yet sent are cancelled (those in
        flight finish, and their answers are cached)."""
        failed = threading.Event()  # set by the failing worker itself, so no worker starts another request after it

        def ask(request: Request) -> dict[str, Any]:
            if failed.is_set():
                raise CancelledError
            try:
                return self._ask(request)
            except BaseException:
                failed.set()
                raise

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(ask, request) for request in requests]
            error: BaseException | None = None
            for done in progress(as_completed(futures), total=len(futures), desc=desc):
                if done.cancelled() or isinstance(done.exception(), CancelledError) or error is not None:
                    continue  # skipped after the failure, which may finish after requests it made skip
                if (error := done.exception()) is not None:
                    for future in futures:
                        future.cancel()
            if error is not None:
                raise error
            return [future.result() for future in futures]


class AnswerStream:
    """One streamed answer from an :class:`OpenAIChatGenerator`: iterating yields its text
    pieces (the server's stop strings end it); :meth:`close`, from any thread, closes the
    connection, which ends the server's generation. ``prompt_tokens`` and ``completion_tokens``:
    the server's usage when it sends one, else ``None`` and the pieces received."""

    def __init__(self, generator: OpenAIChatGenerator, request: Request):
        self.generator, self.request = generator, request
        self.prompt_tokens: int | None = None
        self.completion_tokens = 0
        self.closed = False
        self._chunks: Any = None

    def __iter__(self) -> Iterator[str]:
        g, chat = self.generator, not isinstance(self.request, str)
        received = False
        try:
            if chat:
                self._chunks = g.client.chat.completions.create(model=g.model, messages=self.request, stream=True, **g.params)
            else:
                self._chunks = g.client.completions.create(model=g.model, prompt=self.request, stream=True, **g.params)
            if self.closed:
                return
            for chunk in self._chunks:
                received = True
                if (usage := getattr(chunk, "usage", None)) is not None:
                    self.prompt_tokens, self.completion_tokens = usage.prompt_tokens, usage.completion_tokens
                if chunk.choices and (piece := chunk.choices[0].delta.content if chat else chunk.choices[0].text):
                    self.completion_tokens += usage is None
                    yield piece
        except Exception as err:
            if not self.closed:
                raise g._failure(err, 1) from err
        finally:
            cancelled = self.closed
            self.close()
        if not received and not cancelled:
            raise GeneratorError(f"the generator at {g.base_url} sent no completion (not an OpenAI-compatible stream)")

    def close(self) -> None:
        self.closed = True
        if self._chunks is not None:
            self._chunks.close()


class TransformersGenerator:
    """A local causal LM through transformers: a model folder, or a ``.gguf`` file (de-quantized;
    see :func:`~isorag_pyg.qa.models.load_gguf`). Greedy decoding in batches of ``batch_size``
    prompts of similar length, left-padded; generation ends at ``max_new_tokens`` or, per prompt,
    at the first ``stop`` string. Chat messages go through the tokenizer's chat template (joined
    by blank lines if it has none); a prompt string is tokenized as is. Prompt tokens are counted
    with the model's own tokenizer."""

    token_counter = "the local model's tokenizer"

    def __init__(self, model_path: str | Path, max_new_tokens: int = 64, device: str | None = None, batch_size: int = 8,
                 stop: list[str] | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from isorag_pyg.qa.models import load_gguf

        path = Path(model_path)
        if not path.exists():
            raise GeneratorError(f"no local model at {model_path}")
        if path.suffix == ".gguf":
            self.tokenizer, self.model = load_gguf(path)
        else:
            self.tokenizer, self.model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
        if device:
            self.model.to(device)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.max_new_tokens, self.batch_size, self.stop = max_new_tokens, batch_size, list(stop or [])

    def encode(self, request: Request) -> list[int]:
        """The prompt's token ids, as the model sees them."""
        if isinstance(request, str):
            return self.tokenizer(request).input_ids
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(request, add_generation_prompt=True, tokenize=False)
            return self.tokenizer(text, add_special_tokens=False).input_ids
        return self.tokenizer("\n\n".join(m["content"] for m in request)).input_ids

    def _generate_batch(self, prompts: list[list[int]]) -> list[str]:
        import torch

        batch = self.tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt").to(self.model.device)
        extra = {"stop_strings": self.stop, "tokenizer": self.tokenizer} if self.stop else {}
        with torch.no_grad():
            out = self.model.generate(**batch, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id, **extra)
        width = batch["input_ids"].shape[1]
        return [first_answer(self.tokenizer.decode(row[width:], skip_special_tokens=True), self.stop) for row in out]

    def generate(self, requests: list[Request]) -> list[dict[str, Any]]:
        """One record (``answer``, ``prompt_tokens``) per request, in request order."""
        ids = [self.encode(r) for r in requests]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: list[dict[str, Any]] = [{} for _ in ids]
        for start in progress(range(0, len(order), self.batch_size), desc="generating"):
            chunk = order[start:start + self.batch_size]
            for i, answer in zip(chunk, self._generate_batch([ids[i] for i in chunk])):
                out[i] = {"answer": answer, "prompt_tokens": len(ids[i])}
        return out


#: Reader kind -> class: ``openai`` (any OpenAI-compatible server) and ``transformers`` (a local
#: model); plugins add theirs through the ``isorag_pyg.readers`` entry-point group.
READERS: Registry[Callable[..., Generator]] = Registry({"openai": OpenAIChatGenerator, "transformers": TransformersGenerator},
                                                       group="isorag_pyg.readers", kind="reader")
