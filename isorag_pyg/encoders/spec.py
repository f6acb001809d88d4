"""What an index records about its encoder (the manifest's ``encoder`` entry), and the encoder
that such a record describes."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from isorag_pyg.encoders.sentence import SentenceEncoder, TextEncoder


def encoder_spec(encoder: TextEncoder, dim: int) -> dict[str, Any]:
    """The manifest's record of ``encoder``: name, fingerprint, dimension, backend (and the
    server of an OpenAI-compatible encoder; never its API key)."""
    spec = {"name": encoder.name, "fingerprint": encoder.fingerprint, "dim": int(dim), "backend": getattr(encoder, "backend", "torch")}
    if base_url := getattr(encoder, "base_url", None):
        spec["base_url"] = base_url
    if getattr(encoder, "pool_tokens", False):
        spec["pool_tokens"] = True
    return spec


def build_encoder(name: str, backend: str = "torch", **options: Any) -> TextEncoder:
    """``name`` on ``backend``: a sentence-transformers model (``options`` go to
    :class:`SentenceEncoder`), or with ``"openai"`` a model of an OpenAI-compatible server
    (``options``: :class:`~isorag_pyg.encoders.openai.OpenAIEncoder`'s)."""
    if backend == "openai":
        from isorag_pyg.encoders.openai import OpenAIEncoder

        if not name:
            raise ValueError("the openai encoder backend needs the name of the model the server embeds with (isorag index --encoder MODEL)")

        return OpenAIEncoder(name, **{k: v for k, v in options.items() if k in ("base_url", "dim", "batch_size", "concurrency", "cache_dir", "pool_tokens")})
    if options.pop("pool_tokens", False):
        raise ValueError("pool_tokens (isorag index --pool-tokens) averages an embedding server's per-token vectors: "
                         "it needs the openai backend (--encoder-backend openai)")
    return SentenceEncoder(name, backend=backend, **options)


def encoder_from_spec(spec: Mapping[str, Any], backend: str | None = None, **options: Any) -> TextEncoder:
    """The encoder an index was built with, on its recorded backend or on ``backend`` (checked
    against the recorded fingerprint by the index); ``options`` go to the encoder's constructor
    (``cache_dir``, ``show_progress``...). Indexes written before backends existed used torch."""
    recorded = spec.get("backend", "torch")
    if "openai" in (recorded, backend) and backend not in (None, recorded):
        raise ValueError(f"this index was embedded by the {recorded} backend; its questions cannot be embedded by {backend}")
    if recorded == "openai":
        options = {**options, "base_url": spec.get("base_url"), "dim": spec.get("dim"), "pool_tokens": spec.get("pool_tokens", False)}
    return build_encoder(spec["name"], backend or recorded, **options)


def check_encoder(spec: Mapping[str, Any], encoder: TextEncoder) -> None:
    """``ValueError`` unless ``encoder`` has the fingerprint recorded in ``spec`` (an index's
    encoder record)."""
    if encoder.fingerprint != spec["fingerprint"]:
        raise ValueError(f"the encoder {encoder.name!r} ({getattr(encoder, 'backend', 'torch')} backend) differs from the one this "
                         f"index was built with ({spec['name']!r}, {spec.get('backend', 'torch')} backend; "
                         "fingerprint mismatch): rebuild the index, or use a matching encoder")
