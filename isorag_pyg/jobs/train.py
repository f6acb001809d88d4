"""The ``train`` app's job: build the dataset's index with f_θ trained on its corpus graph, and save it
in the run directory."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from isorag_pyg.experiments.index_cache import cached_index
from isorag_pyg.jobs import config as conf
from isorag_pyg.jobs.indexing import process_rank

log = logging.getLogger(__name__)

INDEX_DIR = "index"


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Train f_θ and write ``index/`` (the saved index, with the ISO-RAG knobs ``cfg.retriever``
    sets stored in it, beside those the index stores for its graph), ``checkpoints/`` and ``train_metrics.json`` under ``cfg.paths.output_dir``.
    Returns the metrics, including the optimised ``val/triplet_acc`` and its baselines."""
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    eval_ds, train_ds = conf.dataset_splits(cfg.dataset)
    index = cached_index(eval_ds, train_ds, **conf.index_settings(cfg), cache_dir=None, work_dir=out_dir)
    metrics = {**index.f_theta_info["metrics"], "leak": index.leak,
               **{f"graph/{k}": v for k, v in index.statistics.items() if k != "builders"}}
    if process_rank() != 0:  # an extra DDP rank: it trained its shard; rank 0 writes the results
        return metrics
    _, kind, knobs = conf.retriever_knobs(cfg.retriever)
    iso = {**index.knobs.get("iso", {}), **{k: v for k, v in knobs.items() if k not in ("phi_mode", "seed")}}
    if kind == "iso" and iso:  # the knobs the config sets travel with the index, over those it already stores (an entity graph's)
        index.set_knobs("iso", iso)
    index.save(out_dir / INDEX_DIR)
    (out_dir / "train_metrics.json").write_text(json.dumps(metrics, indent=2))
    log.info("index with f_θ written to %s", out_dir / INDEX_DIR)
    return metrics
