"""PyG transforms."""
from isorag_pyg.transforms.isoperimetric_filter import PHI_MODES, IsoperimetricFilter

__all__ = ["PHI_MODES", "IsoperimetricFilter"]
