"""Corpus-sized map steps beyond one machine, on Ray Data (the ``[ray]`` extra)."""
from isorag_pyg.scale.ray_encoder import EncodeStep, RayEncoder
from isorag_pyg.scale.ray_map import MapStep, ray_map

__all__ = ["EncodeStep", "MapStep", "RayEncoder", "ray_map"]
