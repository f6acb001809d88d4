"""Train f_θ on a corpus graph with Lightning: plain arguments in, ball coordinates out."""
from __future__ import annotations

import logging
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger
from torch import Tensor
from torch_geometric.data import Data
from torchmetrics.functional import spearman_corrcoef

from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig
from isorag_pyg.training.datamodule import GraphTripletDataModule
from isorag_pyg.training.module import HyperbolicEmbeddingModule

log = logging.getLogger(__name__)
# Lightning calls an API torch deprecated (LeafSpec) on every fit: a note between those two
# projects, silenced here where training calls Lightning
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")

@dataclass
class FThetaFit:
    """A trained f_θ: the best encoder (CPU, eval mode), every node's ball coordinates, the
    held-out metrics and the best checkpoint (``None`` when trained in a temporary directory)."""

    encoder: PoincareEncoder
    z: Tensor
    metrics: dict[str, float]
    checkpoint: str | None


def fit_f_theta(
    graph: Data,
    config: FThetaConfig,
    curvature: float = 1.0,
    work_dir: str | Path | None = None,
    logger: Logger | bool = False,
    ckpt_path: str | Path | None = None,
) -> FThetaFit:
    """Train f_θ on ``graph`` (``x`` and undirected ``edge_index``) and embed every node.

    Checkpoints (best by ``val/objective``, and ``last.ckpt``) go to ``work_dir/checkpoints``
    (a temporary directory when ``work_dir`` is ``None``); ``ckpt_path`` resumes a run.
    """
    with tempfile.TemporaryDirectory(prefix="isorag-f-theta-") as scratch:
        out_dir = Path(work_dir) if work_dir is not None else Path(scratch)
        return _fit(graph, config, curvature, out_dir, logger, ckpt_path, keep_checkpoint=work_dir is not None)


def _fit(graph: Data, config: FThetaConfig, curvature: float, out_dir: Path, logger: Logger | bool,
         ckpt_path: str | Path | None, keep_checkpoint: bool) -> FThetaFit:
    L.seed_everything(config.seed, workers=True)
    datamodule = GraphTripletDataModule(graph, seed=config.seed, **config.data)
    datamodule.setup()
    model = HyperbolicEmbeddingModule(in_dim=graph.x.size(1), curvature=curvature, **config.model)
    checkpoint = ModelCheckpoint(dirpath=out_dir / "checkpoints", monitor="val/objective", mode="min", save_last=True)
    trainer = L.Trainer(**{**DEFAULT_TRAINER, **config.trainer}, logger=logger, callbacks=[checkpoint], default_root_dir=str(out_dir))
    untrained = trainer.validate(model, datamodule=datamodule, verbose=False)[0]["val/triplet_acc"]
    trainer.fit(model, datamodule=datamodule, ckpt_path=str(ckpt_path) if ckpt_path else None)
    if checkpoint.best_model_path:
        model = HyperbolicEmbeddingModule.load_from_checkpoint(checkpoint.best_model_path, map_location="cpu")
    trained = trainer.validate(model, datamodule=datamodule, verbose=False)[0]
    encoder = model.encoder.cpu().eval()
    z = encoder.embed_all(graph.x.float())
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
    best = checkpoint.best_model_path if keep_checkpoint and checkpoint.best_model_path else None
    return FThetaFit(encoder, z, metrics, best)
