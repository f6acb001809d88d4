"""``train.py``'s job: train f_θ on the configured corpus graph and write ball coordinates."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig, OmegaConf
from torchmetrics.functional import spearman_corrcoef

from isorag_pyg.pipeline import prepare_corpus
from isorag_pyg.training.datamodule import GraphTripletDataModule
from isorag_pyg.training.module import HyperbolicEmbeddingModule
from isorag_pyg.utils.isoperimetric import log_isoperimetric_profile, log_volume

log = logging.getLogger(__name__)

BALL_FILE = "ball_embeddings.pt"


def _logger(cfg: DictConfig):
    if cfg.get("logger") is None:
        return False
    if "wandb" in str(cfg.logger.get("_target_", "")).lower():
        os.environ.setdefault("WANDB_MODE", "offline" if cfg.logger.get("offline", True) else "online")
        os.environ.setdefault("WANDB_SILENT", "true")
    return instantiate(cfg.logger)


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Train, then write ``checkpoints/`` and ``ball_embeddings.pt`` under ``cfg.paths.output_dir``.

    Returns the metrics, including the optimised ``val/triplet_acc`` and its baselines.
    """
    L.seed_everything(cfg.seed, workers=True)
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bundle = prepare_corpus(cfg)
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

    model = model.cpu().eval()
    z = model.encoder.embed_all(bundle.graph.x.float())
    spearman = float(spearman_corrcoef(z.norm(dim=-1).double(), datamodule.node_degree.double()))
    log_phi = log_isoperimetric_profile(bundle.graph.edge_index, log_volume(z, cfg.phi.p, model.encoder.curvature), cfg.phi.eps)
    metrics = {
        "val/triplet_acc": float(trained["val/triplet_acc"]),
        "val/triplet_acc_untrained": float(untrained),
        "val/triplet_acc_cosine_baseline": datamodule.cosine_baseline_accuracy(),
        "spearman_degree_norm": spearman,
        "leak": bundle.leak,
        **{f"graph/{k}": v for k, v in bundle.stats.items()},
    }
    ball_path = checkpoint.dirpath if checkpoint.best_model_path else out_dir
    torch.save(
        {
            "z": z,
            "log_phi": log_phi,
            "p": cfg.phi.p,
            "eps": cfg.phi.eps,
            "curvature": model.encoder.curvature,
            "passage_id": bundle.graph.passage_id,
            "builders": bundle.graph.builders,
            "dataset": cfg.dataset.name,
            "checkpoint": checkpoint.best_model_path or None,
        },
        Path(ball_path) / BALL_FILE,
    )
    (out_dir / "train_metrics.json").write_text(json.dumps(metrics, indent=2))
    log.info("f_θ: held-out triplet accuracy %.3f (untrained %.3f, cosine %.3f), Spearman(degree, |z|) %.3f",
             metrics["val/triplet_acc"], untrained, metrics["val/triplet_acc_cosine_baseline"], spearman)
    log.info("ball coordinates written to %s", Path(ball_path) / BALL_FILE)
    if trainer.logger:
        trainer.logger.log_metrics({k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))})
    log.debug("config:\n%s", OmegaConf.to_yaml(cfg))
    return metrics
