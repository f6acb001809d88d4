"""An index's geometry: f_θ (trained on its graph, or taken from elsewhere) with every node's ball
coordinates and what the manifest records about it, and φ and the bridging scores computed from
them (:class:`IndexGeometry`, the index's methods for them)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor
from torch_geometric.data import Data

from isorag_pyg.knobs import PhiSpec
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.training.config import FThetaConfig
from isorag_pyg.utils.bridging import bridging_from_ball
from isorag_pyg.utils.isoperimetric import log_phi_from_ball


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


class IndexGeometry:
    """The f_θ and φ methods of :class:`~isorag_pyg.index.ISORAGIndex` (which provides ``contents``,
    ``graph``, ``z``, ``phi``, ``f_theta``, ``f_theta_info`` and the cache ``_phi_variants``)."""

    def _take_f_theta(self, fitted: FTheta) -> None:
        self.f_theta, self.f_theta_info = fitted.encoder, fitted.info
        self.contents = self.contents.replace(z=fitted.z)
        self._phi_variants = {}

    def train_f_theta(self, config: FThetaConfig | None = None, work_dir: str | Path | None = None, logger: Any = False,
                      ckpt_path: str | Path | None = None, update_phi: bool = True) -> dict[str, float]:
        """Train f_θ on this index's graph (in the ball of curvature ``phi.curvature``; default
        config: :class:`FThetaConfig`'s), keep its weights and every passage's coordinates, and
        (``update_phi``) recompute φ; returns the held-out metrics."""
        fitted = train_f_theta(self.graph, config or FThetaConfig(), self.phi.curvature, work_dir, logger, ckpt_path)
        self._take_f_theta(fitted)
        if update_phi:
            self.set_phi(self.phi)
        return fitted.info["metrics"]

    def use_f_theta(self, encoder: PoincareEncoder) -> None:
        """Use an f_θ trained elsewhere (e.g. another index's): coordinates from its forward pass
        (φ is recomputed by :meth:`set_phi`)."""
        self._take_f_theta(adopt_f_theta(encoder, self.graph.x, self.phi.curvature))  # an entity graph's entities too

    def set_phi(self, spec: PhiSpec) -> None:
        """Recompute and keep φ (and the bridging scores, from the same shells) under ``spec``."""
        log_phi = self.log_phi_for(spec)
        bridging = bridging_from_ball(self.graph.edge_index, self.z, spec, num_nodes=self.graph.num_nodes)
        self.phi, self.contents = spec, self.contents.replace(log_phi=log_phi, bridging=bridging)

    def log_phi_for(self, spec: PhiSpec) -> Tensor:
        """φ under another recipe (e.g. ``p = 0`` as a control), from the stored coordinates."""
        if spec not in self._phi_variants or spec.curvature != self.phi.curvature:
            check_phi_spec(spec, self.phi.curvature, self.z)
            self._phi_variants[spec] = log_phi_from_ball(self.graph.edge_index, self.z, spec, num_nodes=self.graph.num_nodes)
        return self._phi_variants[spec]
