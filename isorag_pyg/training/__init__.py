"""Lightning training of the hyperbolic encoder f_θ."""
from isorag_pyg.training.datamodule import GraphTripletDataModule
from isorag_pyg.training.module import HyperbolicEmbeddingModule

__all__ = ["GraphTripletDataModule", "HyperbolicEmbeddingModule"]
