"""Neural modules: the hyperbolic encoder f_θ and its losses."""
from isorag_pyg.nn.losses import degree_target_radius, radial_depth_loss, triplet_margin_loss
from isorag_pyg.nn.poincare_encoder import PoincareEncoder

__all__ = ["PoincareEncoder", "degree_target_radius", "radial_depth_loss", "triplet_margin_loss"]
