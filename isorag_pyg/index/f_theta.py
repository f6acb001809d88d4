"""An index's f_θ: trained on its graph, or taken from elsewhere, with every passage's ball
coordinates and what the manifest records about it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor

from isorag_pyg.knobs import PhiSpec
from isorag_pyg.training.config import FThetaConfig

if TYPE_CHECKING:  # annotations only: an opened index checks φ specs here without importing PyG or geoopt
    from torch_geometric.data import Data

    from isorag_pyg.nn.poincare_encoder import PoincareEncoder


@dataclass(frozen=True)
class FTheta:
    """f_θ, the coordinates it gives the passages, and its manifest entry (``info``: training
    config, held-out metrics, checkpoint, architecture)."""

    encoder: PoincareEncoder
    z: Tensor
    info: dict[str, Any]


def _architecture(encoder: PoincareEncoder) -> dict[str, int]:
    return {"in_dim": encoder.in_dim, "out_dim": encoder.out_dim, "hidden_dim": encoder.hidden_dim}


def train_f_theta(graph: Data, config: FThetaConfig, curvature: float, work_dir: str | Path | None = None, logger: Any = False,
                  ckpt_path: str | Path | None = None) -> FTheta:
    """Train f_θ on ``graph`` in the ball of curvature ``curvature`` (Lightning, imported only here)."""
    from isorag_pyg.training.fit import fit_f_theta

    fit = fit_f_theta(graph, config, curvature, work_dir, logger, ckpt_path)
    info = {"config": config.to_dict(), "metrics": fit.metrics, "checkpoint": fit.checkpoint, "architecture": _architecture(fit.encoder)}
    return FTheta(fit.encoder, fit.z, info)


def adopt_f_theta(encoder: PoincareEncoder, embeddings: Tensor, curvature: float) -> FTheta:
    """An f_θ trained elsewhere (e.g. another index's): coordinates from its forward pass."""
    if encoder.in_dim != embeddings.size(1) or encoder.curvature != curvature:
        raise ValueError(f"f_θ takes {encoder.in_dim}-d embeddings in a ball of curvature {encoder.curvature}; this index has "
                         f"{embeddings.size(1)}-d embeddings and φ curvature {curvature}")
    encoder = encoder.eval()
    info = {"config": None, "metrics": None, "checkpoint": None, "architecture": _architecture(encoder)}
    return FTheta(encoder, encoder.embed_all(embeddings.float()), info)


def check_phi_spec(spec: PhiSpec, curvature: float, z: Tensor | None) -> None:
    """``ValueError`` unless φ under ``spec`` can come from coordinates ``z`` of an f_θ trained in
    a ball of ``curvature``."""
    if spec.curvature != curvature and spec.needs_coordinates:
        raise ValueError(f"f_θ was trained in a ball of curvature {curvature}, not {spec.curvature}")
    if spec.needs_coordinates and z is None:
        raise ValueError(f"φ with p = {spec.p} needs f_θ's coordinates, and this index has none (built with p = 0); "
                         "rebuild it with f_θ or use p = 0")
