"""ISO-RAG for PyTorch Geometric: isoperimetric noise control for graph retrieval.

``from isorag_pyg import ISORAGIndex`` is the entry point for your own corpus.
"""
from isorag_pyg.lazy import lazy_attributes
from isorag_pyg.version import __version__

__all__ = ["FThetaConfig", "ISORAGIndex", "PhiSpec", "__version__", "open_index"]
# imported on first use: `import isorag_pyg.datasets` stays light
__getattr__ = lazy_attributes(__name__, {"ISORAGIndex": "index", "open_index": "index", "PhiSpec": "knobs", "FThetaConfig": "training.config"})
