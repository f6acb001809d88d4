"""Faster CPU runtimes for a sentence-transformers model: ONNX Runtime (fp32, or int8 by dynamic
quantisation) and OpenVINO (fp32, or bf16 arithmetic), exported locally from the model's own weights (no network) and cached
under ``<cache dir>/backends/``.

The whole sentence-transformers pipeline (transformer, pooling, normalisation) is exported as one
graph, so a backend gives the same ``[batch, dim]`` embeddings as ``SentenceTransformer.encode``;
tokenisation stays with the model's own tokenizer. optimum (what ``SentenceTransformer(...,
backend="onnx")`` needs) pins transformers < 4.58 and optimum-intel pulls another torch, so the
export uses ``torch.onnx`` and ONNX Runtime's own optimiser and quantiser instead.
"""
from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import queue
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

#: Encoder backends: sentence-transformers on torch, ONNX Runtime in fp32 or int8, OpenVINO in fp32
#: or bf16 (the CPU's bf16 instructions where it has them, fp32 where not).
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-bf16")
#: The runtime package each backend imports, and the extra that installs it.
_PACKAGES = {"onnx": ("onnxruntime", "onnx"), "onnx-int8": ("onnxruntime", "onnx"), "openvino": ("openvino", "openvino"),
             "openvino-bf16": ("openvino", "openvino")}
#: OpenVINO's inference precision of each OpenVINO backend.
_OPENVINO_PRECISION = {"openvino": "f32", "openvino-bf16": "bf16"}
#: Tokenizer outputs the exported graph takes, in this order (those the tokenizer gives).
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Padded tokens per batch of an exported backend (texts grouped by token length): 1,024 encoded
#: MiniLM fastest on 2 cores, 17% faster than 32 texts a batch ordered by characters.
TOKENS_PER_BATCH = 1024

#: A batch: its texts' positions and their padded tokenizer outputs (:func:`token_batches`).
Batch = tuple[list[int], dict[str, np.ndarray]]
#: Tokenizer outputs of several texts, unpadded: output name -> one token list per text.
Features = Mapping[str, Sequence[Sequence[int]]]


class MissingBackendError(ImportError):
    """The runtime of an encoder backend is not installed."""


def check_backend(backend: str) -> None:
    """``ValueError`` unless ``backend`` is one of :data:`BACKENDS`; :class:`MissingBackendError`
    (one line naming the extra to install) when its runtime package is missing."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown encoder backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend in _PACKAGES:
        package, extra = _PACKAGES[backend]
        if importlib.util.find_spec(package) is None:
            raise MissingBackendError(f"the {backend} encoder backend needs {package}: pip install 'isorag_pyg[{extra}]'")


def backend_fingerprint(model_fingerprint: str, backend: str) -> str:
    """The fingerprint of a model run on ``backend``. The fp32 backends give the same embeddings as
    torch's, and bf16 arithmetic nearly so (measured: the project's benchmark docs, encoder
    backends): they share the model's own fingerprint, so
    an index built with one may be queried with another; int8 changes the vectors, so
    ``onnx-int8`` has a fingerprint of its own (naming its one-text-a-run encoding) and is never
    mixed with the others."""
    return f"{model_fingerprint}+onnx-int8-dynamic-per-text" if backend == "onnx-int8" else model_fingerprint


def export_dir(model_fingerprint: str, cache_dir: Path) -> Path:
    """Where a model's exported files are kept: ``cache_dir / "backends" /`` its fingerprint's start."""
    return cache_dir / "backends" / model_fingerprint.replace(":", "-")[:48]


def exported_name(backend: str) -> str:
    """The exported ONNX file of ``backend``: int8 for ``onnx-int8``, fp32 for the others (OpenVINO reads it too)."""
    return "model-int8.onnx" if backend == "onnx-int8" else "model-fp32.onnx"


def exported_model(model: SentenceTransformer, model_fingerprint: str, backend: str, cache_dir: Path) -> Path:
    """The ONNX file of ``model`` for ``backend`` (OpenVINO reads the fp32 one), exported once
    per model fingerprint into ``cache_dir / "backends"`` (written atomically)."""
    directory = export_dir(model_fingerprint, cache_dir)
    path = directory / exported_name(backend)
    if path.is_file():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory, prefix=".export-"))
    try:
        log.info("exporting the encoder to ONNX (%s) into %s", path.name, directory)
        _export(model, tmp / "model.onnx")
        _optimize(model, tmp / "model.onnx", tmp / "fused.onnx")
        if backend == "onnx-int8":
            _quantize(tmp / "fused.onnx", tmp / "final.onnx")
        else:
            os.replace(tmp / "fused.onnx", tmp / "final.onnx")
        os.replace(tmp / "final.onnx", path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _export(model: SentenceTransformer, path: Path) -> None:
    """``torch.onnx`` export of the whole pipeline with dynamic batch and sequence axes."""
    sample = tokenize(model, ["an example sentence", "a second, somewhat longer example sentence"])
    names = list(sample)

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, inputs)))["sentence_embedding"]

    attention = _set_attention(model, "eager")  # eager attention exports to the pattern ONNX Runtime fuses
    try:
        # the tracer's notes on the model's Python branches and opset 17's indexing: about the
        # exporter, not the user's embeddings (checked equal to torch's by the backend tests)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
            torch.onnx.export(Pipeline().eval(), tuple(torch.from_numpy(sample[n]) for n in names), str(path), dynamo=False,
                              input_names=names, output_names=["sentence_embedding"], opset_version=17,
                              dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "sentence_embedding": {0: "batch"}})
    finally:
        _set_attention(model, attention)


def _set_attention(model: SentenceTransformer, implementation: str | None) -> str | None:
    """Set the transformer's attention implementation; the previous one."""
    config = getattr(model[0].auto_model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    if config is not None and implementation is not None:
        config._attn_implementation = implementation
    return previous


def _optimize(model: SentenceTransformer, source: Path, target: Path) -> None:
    """ONNX Runtime's transformer optimiser (fused attention, layer norms, GELU) for BERT-like
    models; any other model is kept as exported."""
    config = model[0].auto_model.config
    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        optimize_model(str(source), model_type="bert", num_heads=heads or 0, hidden_size=hidden or 0).save_model_to_file(str(target))
    except Exception as err:  # noqa: BLE001 - an architecture the optimiser does not know: the plain export runs too
        log.warning("ONNX Runtime's optimiser could not fuse this model (%s); using the plain export", err)
        shutil.copyfile(source, target)


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation: int8 weights per channel, activations quantised on the fly."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def tokenize(model: SentenceTransformer, texts: list[str]) -> dict[str, np.ndarray]:
    """The model's tokenizer outputs as int64 arrays (padded to the longest, truncated at
    ``max_seq_length``)."""
    features = model.tokenizer(texts, padding=True, truncation=True, max_length=model.max_seq_length, return_tensors="np")
    return {name: features[name].astype(np.int64, copy=False) for name in _INPUTS if name in features}


def texts_per_run(backend: str, batch_size: int) -> int:
    """Texts an exported ``backend`` takes in one run: one for int8, whose dynamic quantisation
    scales a run's activations together (texts run together would change each other's vectors;
    one at a time was as fast, measured), else ``batch_size``."""
    return 1 if backend == "onnx-int8" else batch_size


def model_features(model: SentenceTransformer, texts: list[str]) -> Features:
    """The model's tokenizer outputs for ``texts``, unpadded, truncated at ``max_seq_length``."""
    return model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)


def token_batches(features: Features, max_texts: int, max_tokens: int = TOKENS_PER_BATCH) -> Iterator[Batch]:
    """Texts tokenised once (``features``: each tokenizer output's unpadded token lists), longest
    first, in batches of at most ``max_texts`` texts and ``max_tokens`` padded tokens (a longer
    text goes alone): pairs of the batch's positions among the texts and its padded int64
    tokenizer outputs."""
    names = [name for name in _INPUTS if name in features]
    lengths = [len(ids) for ids in features["input_ids"]]
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    start = 0
    while start < len(order):
        width = lengths[order[start]]  # the longest of the batch: its padded length
        size = max(1, min(max_texts, max_tokens // max(width, 1), len(order) - start))
        rows = order[start:start + size]
        batch = {name: np.zeros((size, width), dtype=np.int64) for name in names}
        for j, i in enumerate(rows):
            for name in names:
                batch[name][j, :lengths[i]] = features[name][i]
        yield rows, batch
        start += size


def embed_batches(runner: Runner, batches: Iterable[Batch], count: int, done: Callable[[int], object] | None = None) -> torch.Tensor:
    """The ``[count, dim]`` unit-norm float32 embeddings of ``count`` texts, run through ``runner``
    batch by batch (:func:`token_batches`), each batch's size reported to ``done`` as it finishes."""
    out: torch.Tensor | None = None
    for rows, embeddings in runner.map(batches):
        out = torch.empty(count, embeddings.shape[1], dtype=torch.float32) if out is None else out
        out[rows] = torch.from_numpy(embeddings).float()
        if done is not None:
            done(len(rows))
    if out is None:
        raise ValueError("no texts to embed")
    return torch.nn.functional.normalize(out, dim=1)


class Runner:
    """Runs batches through an exported model on ``threads`` CPU threads: ONNX Runtime as one
    single-threaded session per thread, the batches spread over them (for MiniLM's small batches
    two one-thread sessions encoded 1.35x the passages/s of one two-thread session, measured on
    2 cores); OpenVINO as one request on all threads."""

    def __init__(self, path: Path, backend: str, threads: int):
        self.threads = max(1, threads)
        self._free: queue.SimpleQueue[Callable[[dict[str, np.ndarray]], np.ndarray]] = queue.SimpleQueue()
        openvino = backend in _OPENVINO_PRECISION
        for run in ([_openvino(path, self.threads, _OPENVINO_PRECISION[backend])] if openvino else [_onnxruntime(path) for _ in range(self.threads)]):
            self._free.put(run)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="isorag-encoder") if self.threads > 1 and not openvino else None

    def _run(self, batch: Batch) -> tuple[list[int], np.ndarray]:
        run = self._free.get()
        try:
            return batch[0], run(batch[1])
        finally:
            self._free.put(run)

    def map(self, batches: Iterable[Batch]) -> Iterator[tuple[list[int], np.ndarray]]:
        """Each batch's positions and embeddings, in order; at most a few batches per thread are
        tokenised ahead of the runs."""
        if self._pool is None:
            yield from map(self._run, batches)
            return
        batches = iter(batches)
        while window := list(itertools.islice(batches, 4 * self.threads)):
            yield from self._pool.map(self._run, window)


def _onnxruntime(path: Path) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return lambda features: session.run(None, {k: v for k, v in features.items() if k in names})[0]


def _openvino(path: Path, threads: int, precision: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    import openvino

    core = openvino.Core()
    if precision == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        log.warning("this CPU has no native bf16 arithmetic: the openvino-bf16 backend runs in fp32 (the same vectors, openvino's speed)")
        precision = "f32"
    compiled = core.compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": precision,
                                                     "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    return lambda features: request.infer(features)[0].copy()
