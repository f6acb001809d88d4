"""The jobs' index for a dataset: built from the configs, or opened from a directory, or reused
from the cache (so that sweeps build it once)."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path

from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from isorag_pyg.datasets import QADataset
from isorag_pyg.encoders import default_cache_dir
from isorag_pyg.index import IndexFormatError, ISORAGIndex, corpus_hash
from isorag_pyg.jobs import config as conf

log = logging.getLogger(__name__)


def process_rank() -> int:
    """This process's global rank: 0 except in the extra processes of a DDP run."""
    return rank_zero_only.rank


def build_index(cfg: DictConfig, eval_ds: QADataset, train_ds: QADataset | None, work_dir: Path | None,
                with_f_theta: bool, logger=False) -> ISORAGIndex:
    """An index over ``eval_ds``'s corpus with the configured encoder, graph, f_θ and φ."""
    return ISORAGIndex.build(
        eval_ds.corpus, encoder=conf.encoder(cfg.encoder), graph=conf.graph_spec(cfg),
        f_theta=conf.f_theta_config(cfg) if with_f_theta else None, phi=conf.phi_spec(cfg),
        questions=eval_ds, train_questions=train_ds, work_dir=work_dir, logger=logger, ckpt_path=cfg.get("ckpt_path"),
        progress=cfg.encoder.get("show_progress", True),
    )


def index_cache_dir(cfg: DictConfig, eval_ds: QADataset, train_ds: QADataset | None, with_f_theta: bool) -> Path | None:
    """Where the index for this dataset and these configs is cached (``None``: caching is off)."""
    directory = cfg.encoder.get("cache_dir", "default")
    if directory is None:
        return None
    parts = {
        "corpus": corpus_hash(eval_ds.corpus), "encoder": conf.encoder(cfg.encoder).fingerprint, "graph": conf.graph_spec(cfg),
        "phi": asdict(conf.phi_spec(cfg)), "f_theta": conf.f_theta_config(cfg).to_dict() if with_f_theta else None,
    }
    if {"context_cooccurrence", "train_cooccurrence"} & set(parts["graph"]):  # these graphs depend on the questions
        parts["questions"] = [[q.id, q.context_ids] for ds in (eval_ds, train_ds) if ds is not None for q in ds.questions]
    key = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return (default_cache_dir() if directory == "default" else Path(directory)) / "indexes" / key


def needs_f_theta(cfg: DictConfig, retrievers: list[DictConfig]) -> bool:
    """``train_f_theta``: ``true``/``false``, or ``auto``: when φ or one of ``retrievers`` uses
    ball coordinates (``p > 0``)."""
    choice = cfg.get("train_f_theta", "auto")
    if choice == "auto":
        return conf.phi_spec(cfg).needs_coordinates or any(float(r.get("p", 0.0)) > 0 for r in retrievers)
    if not isinstance(choice, bool):
        raise TypeError(f"train_f_theta must be auto, true or false, got {choice!r}")
    return choice


def dataset_index(cfg: DictConfig, eval_ds: QADataset, train_ds: QADataset | None, out_dir: Path, with_f_theta: bool) -> ISORAGIndex:
    """``cfg.index`` (a saved index, checked against the dataset's corpus), else the cached
    index for these configs, else a new one (with f_θ when ``with_f_theta``), cached."""
    if cfg.get("index"):
        index = ISORAGIndex.load(cfg.index)
        if index.corpus_hash != corpus_hash(eval_ds.corpus):
            raise ValueError(f"{cfg.index}: this index was built over another corpus than {eval_ds.name}'s "
                             f"({len(index)} passages against {len(eval_ds.corpus)})")
        return index
    cached = index_cache_dir(cfg, eval_ds, train_ds, with_f_theta)
    if cached is not None and cached.is_dir():
        try:
            return ISORAGIndex.load(cached)
        except IndexFormatError as err:
            log.warning("discarding unusable cached index (%s); rebuilding", err)
    rank = process_rank()  # extra DDP ranks (sharded evaluation) train in a directory of their own
    work_dir = out_dir / ("f_theta" if rank == 0 else f"f_theta_rank{rank}")
    index = build_index(cfg, eval_ds, train_ds, work_dir if with_f_theta else None, with_f_theta, conf.lightning_logger(cfg))
    if cached is not None and rank == 0:
        index.save(cached)
    return index
