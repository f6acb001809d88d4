"""Lightning training of the hyperbolic encoder f_θ."""
from typing import Any

from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

__all__ = ["DEFAULT_TRAINER", "FThetaConfig", "FThetaFit", "GraphTripletDataModule", "HyperbolicEmbeddingModule", "fit_f_theta"]


def __getattr__(name: str) -> Any:  # Lightning is imported only when training is asked for
    if name in ("GraphTripletDataModule",):
        from isorag_pyg.training.datamodule import GraphTripletDataModule

        return GraphTripletDataModule
    if name == "HyperbolicEmbeddingModule":
        from isorag_pyg.training.module import HyperbolicEmbeddingModule

        return HyperbolicEmbeddingModule
    if name in ("FThetaFit", "fit_f_theta"):
        from isorag_pyg.training import fit

        return getattr(fit, name)
    raise AttributeError(f"module 'isorag_pyg.training' has no attribute {name!r}")
