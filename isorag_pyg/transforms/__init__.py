"""PyG transforms."""
from isorag_pyg.transforms.isoperimetric_filter import IsoperimetricFilter

__all__ = ["IsoperimetricFilter"]
