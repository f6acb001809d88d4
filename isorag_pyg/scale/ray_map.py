"""One corpus-sized map step on Ray Data: texts in, one result per text out, in corpus order.

A step is a picklable recipe (:class:`MapStep`); each Ray actor calls its ``load()`` once (a
model is loaded once per worker, not per batch) and then maps batches of texts. Encoding is one
such step (:class:`~isorag_pyg.scale.ray_encoder.EncodeStep`); entity extraction can be another,
with the same driver. Everything else of an index build stays on the building node.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

RAY_MISSING = "Ray is not installed: pip install 'isorag_pyg[ray]' (on every node of the cluster)"


class MapStep(Protocol):
    """A picklable recipe for a map step: ``load()`` returns the function that maps a batch of
    texts to one result per text (an array with one row per text)."""

    def load(self) -> Callable[[list[str]], np.ndarray]: ...


class _StepActor:
    """A Ray Data actor: loads the step once, then maps ``{"row", "text"}`` batches to ``{"row", "result"}``."""

    def __init__(self, step: MapStep):
        self.apply = step.load()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = np.asarray(self.apply([str(text) for text in batch["text"]]))
        if len(results) != len(batch["row"]):
            raise ValueError(f"the map step gave {len(results)} results for {len(batch['row'])} texts")
        return {"row": batch["row"], "result": results}


def ray_map(texts: Sequence[str], step: MapStep, address: str | None = None, workers: int = 2, batch_size: int = 256,
            cpus_per_worker: float = 1.0, gpus_per_worker: float = 0.0) -> np.ndarray:
    """Map ``texts`` with ``step`` on ``workers`` Ray actors, ``batch_size`` texts per call;
    the results stacked in the order of ``texts``.

    ``address``: a running cluster (``"auto"``, ``"ray://head:10001"``, ``"head:6379"``), or
    ``None`` for a Ray instance on this machine only; a Ray session already open in this process
    is used as it is. Each actor takes ``cpus_per_worker`` CPUs (its torch threads) and
    ``gpus_per_worker`` GPUs (1: one actor per GPU)."""
    texts = list(texts)
    if not texts:
        raise ValueError("ray_map needs at least one text")
    if workers < 1 or batch_size < 1:
        raise ValueError(f"workers and batch_size must be >= 1, got {workers} and {batch_size}")
    try:  # after the arguments' checks: they need no Ray
        import ray
    except ImportError as err:
        raise ImportError(RAY_MISSING) from err
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        blocks = -(-len(texts) // batch_size)  # one block a batch: Ray's default splits small inputs into tiny blocks
        data = ray.data.from_items([{"row": i, "text": text} for i, text in enumerate(texts)], override_num_blocks=blocks)
        mapped = data.map_batches(_StepActor, fn_constructor_args=(step,), batch_size=batch_size, batch_format="numpy",
                                  compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=cpus_per_worker,
                                  num_gpus=gpus_per_worker)
        rows: list[np.ndarray] = []
        results: list[np.ndarray] = []
        for batch in mapped.iter_batches(batch_size=None, batch_format="numpy"):
            rows.append(batch["row"])
            results.append(batch["result"])
    finally:
        if started_here:
            ray.shutdown()
    order = np.concatenate(rows)
    if not np.array_equal(np.sort(order), np.arange(len(texts))):
        raise RuntimeError(f"Ray returned {len(order)} results for {len(texts)} texts, or some twice")
    return _in_order(np.concatenate(results), order)


def _in_order(results: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``results`` (in the order Ray returned them, at ``rows``) put back in corpus order."""
    out = np.empty_like(results)
    out[rows] = results
    return out
