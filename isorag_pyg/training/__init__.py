"""Lightning training of the hyperbolic encoder f_θ (Lightning is imported only when training is
asked for)."""
from isorag_pyg.lazy import lazy_attributes
from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

__all__ = ["DEFAULT_TRAINER", "FThetaConfig", "FThetaFit", "GraphTripletDataModule", "HyperbolicEmbeddingModule", "fit_f_theta"]
__getattr__ = lazy_attributes(__name__, {"GraphTripletDataModule": "datamodule", "HyperbolicEmbeddingModule": "module",
                                         "FThetaFit": "fit", "fit_f_theta": "fit"})
