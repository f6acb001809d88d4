"""ISO-RAG for PyTorch Geometric: isoperimetric noise control for graph retrieval.

``from isorag_pyg import ISORAGIndex`` is the entry point for your own corpus.
"""
from typing import Any

__version__ = "0.1.0"
__all__ = ["FThetaConfig", "ISORAGIndex", "PhiSpec", "__version__"]


def __getattr__(name: str) -> Any:  # imported on first use: `import isorag_pyg.datasets` stays light
    if name == "ISORAGIndex":
        from isorag_pyg.index import ISORAGIndex

        return ISORAGIndex
    if name == "PhiSpec":
        from isorag_pyg.utils.isoperimetric import PhiSpec

        return PhiSpec
    if name == "FThetaConfig":
        from isorag_pyg.training.config import FThetaConfig

        return FThetaConfig
    raise AttributeError(f"module 'isorag_pyg' has no attribute {name!r}")
