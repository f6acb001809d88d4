"""Losses that shape the ball: graph triplets and radial depth."""
from __future__ import annotations

import torch
from torch import Tensor


def triplet_margin_loss(d_pos: Tensor, d_neg: Tensor, margin: float, weight: Tensor | None = None) -> Tensor:
    """``mean(relu(d(a, p) - d(a, n) + margin))``, optionally weighted per triplet."""
    loss = torch.relu(d_pos - d_neg + margin)
    if weight is None:
        return loss.mean()
    return (loss * weight).sum() / weight.sum().clamp_min(1.0)


def degree_target_radius(degree: Tensor, r_min: float = 0.1, r_max: float = 0.9) -> Tensor:
    """Target ‖z‖ per node: hubs (high degree) near ``r_min``, leaves near ``r_max``.

    Interpolates on ``log1p(degree)`` scaled to [0, 1] by the largest degree.
    """
    if not 0 <= r_min < r_max < 1:
        raise ValueError(f"need 0 <= r_min < r_max < 1, got {r_min}, {r_max}")
    scaled = torch.log1p(degree.float())
    scaled = scaled / scaled.max().clamp_min(1e-12)
    return r_max - (r_max - r_min) * scaled


def radial_depth_loss(z: Tensor, target_radius: Tensor) -> Tensor:
    """Mean squared gap between ‖z‖ and the degree-derived target radius."""
    return ((z.norm(dim=-1) - target_radius) ** 2).mean()
