"""f_θ: passage embeddings -> the Poincaré ball."""
from __future__ import annotations

import geoopt
import torch
from torch import Tensor, nn


class PoincareEncoder(nn.Module):
    r"""Map Euclidean passage embeddings into the Poincaré ball of curvature :math:`-c`.

    A linear map (or a one-hidden-layer MLP) to tangent vectors at the origin, then
    ``expmap0`` and ``projx`` so every output lies strictly inside the ball.

    Args:
        in_dim: input embedding size.
        out_dim: ball dimension (default: ``16``).
        hidden_dim: MLP hidden size, ``None`` for a linear map (default: ``128``).
        curvature: :math:`c > 0` (default: ``1.0``).

    Example:
        >>> enc = PoincareEncoder(8, out_dim=2)
        >>> z = enc(torch.randn(5, 8))
        >>> bool((z.norm(dim=-1) < 1).all())
        True
    """

    def __init__(self, in_dim: int, out_dim: int = 16, hidden_dim: int | None = 128, curvature: float = 1.0):
        super().__init__()
        if curvature <= 0:
            raise ValueError(f"curvature must be > 0, got {curvature}")
        self.ball = geoopt.PoincareBall(c=curvature)
        if hidden_dim:
            self.net = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, out_dim))
        else:
            self.net = nn.Linear(in_dim, out_dim)
        self.in_dim, self.out_dim, self.hidden_dim = in_dim, out_dim, hidden_dim

    @property
    def curvature(self) -> float:
        return float(self.ball.c)

    def forward(self, x: Tensor) -> Tensor:
        if x.size(-1) != self.in_dim:
            raise ValueError(f"expected embeddings of size {self.in_dim}, got {x.size(-1)}")
        return self.ball.projx(self.ball.expmap0(self.net(x)))

    def distance(self, a: Tensor, b: Tensor) -> Tensor:
        """Geodesic distance in the ball."""
        return self.ball.dist(a, b)

    @torch.no_grad()
    def embed_all(self, x: Tensor, batch_size: int = 65536) -> Tensor:
        """Ball coordinates for every row of ``x``, in chunks."""
        if x.size(0) == 0:
            return x.new_empty(0, self.out_dim)
        return torch.cat([self(x[i : i + batch_size]) for i in range(0, x.size(0), batch_size)])
