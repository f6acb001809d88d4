"""``train.py``'s job: train f_θ on the configured corpus graph and write ball coordinates."""
from __future__ import annotations

import json
from dataclasses import dataclass
import logging
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import Tensor
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig
from torchmetrics.functional import spearman_corrcoef

from isorag_pyg.encoders.cache import cache_key
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.pipeline import CorpusBundle, prepare_corpus, process_rank
from isorag_pyg.training.datamodule import GraphTripletDataModule
from isorag_pyg.training.module import HyperbolicEmbeddingModule
from isorag_pyg.utils.isoperimetric import ball_log_profile

log = logging.getLogger(__name__)

BALL_FILE = "ball_embeddings.pt"


def _logger(cfg: DictConfig):
    if cfg.get("logger") is None:
        return False
    if "wandb" in str(cfg.logger.get("_target_", "")).lower():
        os.environ.setdefault("WANDB_MODE", "offline" if cfg.logger.get("offline", True) else "online")
        os.environ.setdefault("WANDB_SILENT", "true")
    return instantiate(cfg.logger)


@dataclass
class FThetaFit:
    """A trained f_θ: metrics, the best encoder (on CPU), its checkpoint and every node's ball coordinates."""

    metrics: dict[str, Any]
    encoder: PoincareEncoder
    checkpoint: str | None
    z: Tensor


def fit_f_theta(cfg: DictConfig, bundle: CorpusBundle, out_dir: Path) -> FThetaFit:
    """Train f_θ on ``bundle.graph``."""
    L.seed_everything(cfg.seed, workers=True)
    datamodule = GraphTripletDataModule(bundle.graph, seed=cfg.seed, **cfg.data)
    datamodule.setup()
    model = HyperbolicEmbeddingModule(in_dim=bundle.graph.x.size(1), **cfg.model)
    checkpoint = ModelCheckpoint(dirpath=out_dir / "checkpoints", monitor="val/objective", mode="min", save_last=True)
    trainer: L.Trainer = instantiate(cfg.trainer, logger=_logger(cfg), callbacks=[checkpoint], default_root_dir=str(out_dir))

    untrained = trainer.validate(model, datamodule=datamodule, verbose=False)[0]["val/triplet_acc"]
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    if checkpoint.best_model_path:
        model = HyperbolicEmbeddingModule.load_from_checkpoint(checkpoint.best_model_path, map_location="cpu")
    trained = trainer.validate(model, datamodule=datamodule, verbose=False)[0]
    encoder = model.encoder.cpu().eval()
    z = encoder.embed_all(bundle.graph.x.float())
    metrics = {
        "val/triplet_acc": float(trained["val/triplet_acc"]),
        "val/triplet_acc_untrained": float(untrained),
        "val/triplet_acc_cosine_baseline": datamodule.cosine_baseline_accuracy(),
        "spearman_degree_norm": float(spearman_corrcoef(z.norm(dim=-1).double(), datamodule.node_degree.double())),
    }
    if trainer.logger:
        trainer.logger.log_metrics(metrics)
    if trainer.is_global_zero:
        log.info("f_θ: held-out triplet accuracy %.3f (untrained %.3f, cosine %.3f), Spearman(degree, |z|) %.3f",
                 metrics["val/triplet_acc"], untrained, metrics["val/triplet_acc_cosine_baseline"], metrics["spearman_degree_norm"])
    return FThetaFit(metrics, encoder, checkpoint.best_model_path or None, z)


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Train, then write ``checkpoints/`` and ``ball_embeddings.pt`` under ``cfg.paths.output_dir``.

    Returns the metrics, including the optimised ``val/triplet_acc`` and its baselines.
    """
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bundle = prepare_corpus(cfg)
    fit = fit_f_theta(cfg, bundle, out_dir)
    metrics = {**fit.metrics, "leak": bundle.leak, **{f"graph/{k}": v for k, v in bundle.stats.items()}}
    if process_rank() != 0:  # an extra DDP rank: it trained its shard; rank 0 writes the results
        return metrics
    z, best = fit.z, fit.checkpoint
    log_phi = ball_log_profile(bundle.graph.edge_index, z, cfg.phi.p, fit.encoder.curvature, cfg.phi.eps, cfg.phi.get("shell_floor", 0.0))
    ball_path = (out_dir / "checkpoints" if best else out_dir) / BALL_FILE
    save_ball_embeddings(ball_path, z, fit.encoder.curvature, bundle, best, log_phi=log_phi, p=cfg.phi.p, eps=cfg.phi.eps)
    (out_dir / "train_metrics.json").write_text(json.dumps(metrics, indent=2))
    log.info("ball coordinates written to %s", ball_path)
    return metrics


def save_ball_embeddings(path: Path, z: Tensor, curvature: float, bundle: CorpusBundle, checkpoint: str | None, **extra: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"z": z, "curvature": curvature, "passage_id": bundle.graph.passage_id, "corpus_hash": corpus_hash(bundle),
                "builders": bundle.graph.builders, "dataset": bundle.eval.name, "checkpoint": checkpoint, **extra}, path)


def corpus_hash(bundle: CorpusBundle) -> str:
    """Identifies the passages (ids, titles, texts) that ball coordinates belong to."""
    return cache_key("corpus", [f"{p.id}\0{p.title}\0{p.text}" for p in bundle.eval.corpus])


def load_ball_embeddings(path: str | Path, bundle: CorpusBundle) -> tuple[Tensor, float]:
    """Ball coordinates saved by ``train.py``, checked against the corpus they are used with."""
    saved = torch.load(Path(path), map_location="cpu", weights_only=False)
    if saved.get("corpus_hash") != corpus_hash(bundle):
        raise ValueError(f"{path}: ball coordinates were trained on another corpus ({saved.get('dataset')}) than the one evaluated")
    return saved["z"], float(saved["curvature"])
