"""Questions embedded without importing sentence-transformers or transformers: the model's exported
ONNX file (the one the ``onnx`` and ``onnx-int8`` backends run, :func:`~isorag_pyg.encoders.backends.exported_model`)
run by ONNX Runtime, the text tokenised by the ``tokenizers`` library from the model folder's
``tokenizer.json`` as sentence-transformers tokenises it. This is what makes ``isorag query`` quick:
those two imports and one ONNX session take a fraction of a second, where sentence-transformers'
import and model load take seconds.

It gives the ``onnx`` backend's vectors, so it serves an index whose recorded fingerprint is the
model's (torch, onnx, openvino, openvino-bf16: they share it) or the ``onnx-int8`` one's.
:func:`prepare_exported_encoder` exports the model once per machine (``isorag index`` and
``isorag add`` call it when the ``[onnx]`` extra is installed) and checks, on probe texts, that the
light tokeniser gives sentence-transformers' own tokens; :func:`exported_encoder` finds it again,
or returns ``None`` (onnxruntime or tokenizers missing, a hub model that is not a local folder,
nothing exported yet, or a model folder whose files changed), and the index's recorded encoder
answers instead.
"""
from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from isorag_pyg.encoders.backends import (
    Features,
    Runner,
    backend_fingerprint,
    embed_batches,
    export_dir,
    exported_model,
    exported_name,
    texts_per_run,
    token_batches,
)
from isorag_pyg.encoders.embedding_cache import default_cache_dir
from isorag_pyg.encoders.sentence import SentenceEncoder, TextEncoder, model_fingerprint, resolve_model
from isorag_pyg.progress import progress
from isorag_pyg.utils.files import write_text_atomic

log = logging.getLogger(__name__)

#: The tokeniser settings an export records beside its ONNX files (sentence-transformers' own).
SETTINGS = "query-tokenizer.json"
#: Texts whose light tokens must equal sentence-transformers' before an export is used for questions.
PROBES = ["Where was the engineer of the Eiffel Tower born?", "  Ünïcödé, CAPITALS, 1984 and emoji 🙂 in a padded text  ",
          "北京是中国的首都。", "long " * 600]


def light_tokenizer(model_dir: Path, settings: Mapping[str, Any]) -> Callable[[list[str]], Features]:
    """Texts -> unpadded ``input_ids``, ``attention_mask`` and ``token_type_ids`` from the
    ``tokenizers`` library: stripped, lowercased when the model lowercases, with special tokens,
    truncated at ``max_seq_length`` on the model's side."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(int(settings["max_seq_length"]), direction=settings["truncation_side"])

    def tokenize(texts: list[str]) -> Features:
        texts = [text.strip().lower() if settings["lower_case"] else text.strip() for text in texts]
        encoded = tokenizer.encode_batch(texts)
        return {"input_ids": [e.ids for e in encoded], "attention_mask": [e.attention_mask for e in encoded],
                "token_type_ids": [e.type_ids for e in encoded]}

    return tokenize


class ExportedEncoder:
    """A model's exported ONNX file run by ONNX Runtime on text tokenised by ``tokenizers``
    (:func:`exported_encoder` makes one; the session opens on the first :meth:`encode`).

    Args:
        name, fingerprint: the index's record of its encoder (verified by :func:`exported_encoder`).
        onnx_path: the exported file; ``backend``: ``"onnx"`` or ``"onnx-int8"`` (one text a run).
        tokenize: :func:`light_tokenizer`'s function.
        batch_size: texts a run (default: ``64``); ``threads``: ONNX Runtime sessions, one thread
            each (default: ``1``: a command's few questions).
    """

    def __init__(self, name: str, fingerprint: str, onnx_path: Path, backend: str, tokenize: Callable[[list[str]], Features],
                 batch_size: int = 64, threads: int = 1):
        self.name, self.fingerprint, self.backend = name, fingerprint, backend
        self.onnx_path, self.tokenize, self.batch_size, self.threads = onnx_path, tokenize, batch_size, threads
        self._runner: Runner | None = None

    def encode(self, texts: list[str]) -> torch.Tensor:
        """``[len(texts), dim]`` L2-normalised float32 embeddings (the ``onnx`` backend's)."""
        texts = list(texts)
        if not texts:
            raise ValueError("encode() needs at least one text")
        if self._runner is None:
            self._runner = Runner(self.onnx_path, self.backend, self.threads)
        return embed_batches(self._runner, token_batches(self.tokenize(texts), texts_per_run(self.backend, self.batch_size)), len(texts))


def exported_encoder(spec: Mapping[str, Any], cache_dir: Path | None = None) -> ExportedEncoder | None:
    """The :class:`ExportedEncoder` that gives the fingerprint recorded in ``spec`` (an index's
    encoder record), from ``cache_dir`` (default: :func:`~isorag_pyg.encoders.embedding_cache.default_cache_dir`);
    ``None`` (logged) when there is none: see the module's docstring."""
    if spec.get("backend", "torch") == "openai" or not (model_dir := Path(resolve_model(spec["name"]))).is_dir():
        return None
    missing = [package for package in ("onnxruntime", "tokenizers") if importlib.util.find_spec(package) is None]
    if missing:
        log.info("questions go through sentence-transformers: %s not installed (pip install 'isorag_pyg[onnx]')", " and ".join(missing))
        return None
    model_fp = model_fingerprint(str(model_dir))
    backend = next((b for b in ("onnx", "onnx-int8") if backend_fingerprint(model_fp, b) == spec["fingerprint"]), None)
    directory = export_dir(model_fp, cache_dir or default_cache_dir())
    onnx_path = directory / exported_name(backend or "onnx")
    if backend is None or not onnx_path.is_file() or not (directory / SETTINGS).is_file():
        log.info("questions go through sentence-transformers: %s", "the model folder's files differ from the index's record" if backend is None
                 else f"no exported ONNX encoder in {directory} (isorag index exports it)")
        return None
    settings = json.loads((directory / SETTINGS).read_text())
    log.info("questions go through the exported encoder (ONNX Runtime and tokenizers): %s", onnx_path)
    return ExportedEncoder(spec["name"], spec["fingerprint"], onnx_path, backend, light_tokenizer(model_dir, settings))


def prepare_exported_encoder(encoder: TextEncoder, show_progress: bool = False) -> Path | None:
    """Export ``encoder``'s model (a :class:`SentenceEncoder` over a local folder) for
    :func:`exported_encoder`, once per model and variant, into its export cache, and record the
    tokeniser's settings when the light tokens equal sentence-transformers' on :data:`PROBES`;
    the ONNX file, or ``None`` (logged) when the ``[onnx]`` extra is missing or the model does not
    qualify. ``show_progress``: a stage record (or bar) while it exports."""
    if not isinstance(encoder, SentenceEncoder) or not (Path(encoder.model_path) / "tokenizer.json").is_file():
        return None
    if any(importlib.util.find_spec(package) is None for package in ("onnxruntime", "onnx", "tokenizers")):
        log.info("no ONNX export for fast queries: pip install 'isorag_pyg[onnx]'")
        return None
    model_fp = model_fingerprint(encoder.model_path)
    backend, directory = "onnx-int8" if encoder.backend == "onnx-int8" else "onnx", export_dir(model_fp, encoder.export_dir)
    if (directory / exported_name(backend)).is_file() and (directory / SETTINGS).is_file():
        return directory / exported_name(backend)  # exported and checked before: the model is not even loaded
    with progress(total=1, desc="query encoder", enabled=show_progress) as stage:
        stage.set_postfix_str("exporting to ONNX, once per model")
        model = encoder._load()
        path = exported_model(model, model_fp, backend, encoder.export_dir)
        stage.update()
    settings = {"max_seq_length": int(model.max_seq_length), "lower_case": bool(getattr(model[0], "do_lower_case", False)),
                "truncation_side": str(getattr(model.tokenizer, "truncation_side", "right"))}
    light = light_tokenizer(Path(encoder.model_path), settings)
    preprocess = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers' own: ``tokenize`` before 6.x
    for text in PROBES:
        own = {name: values[0].tolist() for name, values in preprocess([text]).items() if name in ("input_ids", "attention_mask", "token_type_ids")}
        mine = {name: values[0] for name, values in light([text]).items() if name in own}
        if mine != own:
            log.warning("questions keep going through sentence-transformers: the tokenizers library tokenises %r differently", text[:40])
            return None
    write_text_atomic(directory / SETTINGS, json.dumps(settings))
    return path
