"""Embeddings from any OpenAI-compatible server (vLLM, TEI, llama.cpp, Ollama, a hosted API):
batched, several requests in flight, retried with backoff, every finished batch cached."""
from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from isorag_pyg.encoders.embedding_cache import EmbeddingCache, cache_key, default_cache_dir


class EmbeddingServerError(RuntimeError):
    """The server failed a batch (down, too slow, or an answer of the wrong shape)."""


class OpenAIEncoder:
    """Embed texts with ``model`` on an OpenAI-compatible ``/v1/embeddings`` endpoint.

    Args:
        model: the model name the server embeds with.
        base_url: the server's API root, e.g. ``http://localhost:8080/v1`` (default:
            ``$OPENAI_BASE_URL``). The API key is read from ``$OPENAI_API_KEY`` (none needed by
            most local servers) and never recorded.
        dim: the embedding size the server must return (default: whatever its first batch has,
            then every batch must agree).
        batch_size: texts per request (default: ``64``).
        concurrency: requests in flight at once (default: ``4``).
        timeout: seconds one request may take (default: ``60``).
        max_retries: retries of a request that failed to connect, timed out or got 408/429/5xx,
            with exponential backoff (the openai client's) (default: ``4``).
        cache_dir: where finished batches are cached, so that a rerun after a failure resumes
            (default: ``$ISORAG_CACHE_DIR`` or ``~/.cache/isorag_pyg``; ``None``: no cache).
        pool_tokens: average the per-token vectors of a server that does not pool (e.g.
            llama-cpp-python's server over a GGUF without a pooling type); without it such an
            answer is an error (default: ``False``).
    """

    backend = "openai"

    def __init__(self, model: str, base_url: str | None = None, dim: int | None = None, batch_size: int = 64, concurrency: int = 4,
                 timeout: float = 60.0, max_retries: int = 4, cache_dir: str | Path | None = "default", pool_tokens: bool = False):
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise ValueError("the openai encoder needs the server's URL: pass base_url or set OPENAI_BASE_URL")
        if batch_size < 1 or concurrency < 1 or timeout <= 0 or max_retries < 0:
            raise ValueError("batch_size and concurrency must be >= 1, timeout > 0 and max_retries >= 0")
        if not isinstance(pool_tokens, bool):  # a config string such as "no" must not switch it on
            raise TypeError(f"pool_tokens must be true or false, got {pool_tokens!r}")
        self.name, self.base_url, self.dim = model, base_url.rstrip("/"), dim
        self.batch_size, self.concurrency = batch_size, concurrency
        self.pool_tokens = pool_tokens
        self.fingerprint = f"openai:{model}" + ("+mean-of-tokens" if pool_tokens else "")
        directory = default_cache_dir() if cache_dir == "default" else cache_dir
        self.cache = EmbeddingCache(directory) if directory is not None else None
        self._timeout, self._max_retries = timeout, max_retries
        self._client = None

    def _connect(self):
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY") or "unused",
                                         timeout=self._timeout, max_retries=self._max_retries)
        return self._client

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """``[len(texts), dim]`` L2-normalised float32 embeddings; :class:`EmbeddingServerError`
        names the first batch that failed (the batches before it stay cached)."""
        texts = list(texts)
        if not texts:
            raise ValueError("encode() needs at least one text")
        batches = [texts[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="isorag-embed") as pool:
            futures = [pool.submit(self._batch, i, len(batches), batch) for i, batch in enumerate(batches)]
            try:
                parts = [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return torch.cat(parts)

    def _batch(self, number: int, total: int, texts: list[str]) -> torch.Tensor:
        key = cache_key(self.fingerprint, texts)
        if self.cache is not None and (hit := self.cache.load(key, len(texts))) is not None and self._fits(hit):
            return hit
        where = f"batch {number + 1} of {total} (texts {number * self.batch_size}-{number * self.batch_size + len(texts) - 1})"
        try:
            response = self._connect().embeddings.create(model=self.name, input=texts, encoding_format="float")
        except Exception as err:  # the client's own errors after its retries: connection, timeout, HTTP status
            raise EmbeddingServerError(f"the embedding server at {self.base_url} failed {where}: {type(err).__name__}: {err}") from err
        data = sorted(response.data, key=lambda item: item.index)
        vectors = [self._pooled(item.embedding, where) for item in data]
        if len(data) != len(texts):
            raise EmbeddingServerError(f"the embedding server at {self.base_url} returned {len(data)} vectors for the {len(texts)} texts "
                                       f"of {where}")
        sizes = {len(vector) for vector in vectors}
        expected = self.dim if self.dim is not None else next(iter(sizes))
        if sizes != {expected}:
            raise EmbeddingServerError(f"the embedding server at {self.base_url} returned vectors of size {sorted(sizes)} for {where}; "
                                       f"expected {expected}")
        self.dim = expected
        emb = torch.nn.functional.normalize(torch.tensor(vectors, dtype=torch.float32), dim=1)
        if not torch.isfinite(emb).all():
            raise EmbeddingServerError(f"the embedding server at {self.base_url} returned non-finite values for {where}")
        if self.cache is not None:
            self.cache.save(key, emb)
        return emb

    def _pooled(self, embedding: list, where: str) -> list[float]:
        """A text's vector: as sent, or the mean of its per-token vectors with ``pool_tokens``."""
        if not embedding or not isinstance(embedding[0], list):
            return embedding
        if not self.pool_tokens:
            raise EmbeddingServerError(f"the embedding server at {self.base_url} returned one vector per token for {where} (it does "
                                       "not pool): start it with pooling, or average them with pool_tokens=True (isorag index "
                                       "--pool-tokens, encoder.pool_tokens=true)")
        return torch.tensor(embedding, dtype=torch.float32).mean(0).tolist()

    def _fits(self, cached: torch.Tensor) -> bool:
        return self.dim is None or cached.size(1) == self.dim
