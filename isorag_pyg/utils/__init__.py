"""Pure functions on graphs and ball coordinates."""
from isorag_pyg.utils.isoperimetric import (
    ball_log_profile,
    check_beta,
    clean_edge_index,
    isoperimetric_keep_mask,
    log_conformal_factor,
    log_isoperimetric_profile,
    log_volume,
    origin_volume,
    scatter_logsumexp,
    two_hop_shell_pairs,
)

__all__ = [
    "ball_log_profile",
    "check_beta",
    "clean_edge_index",
    "isoperimetric_keep_mask",
    "log_conformal_factor",
    "log_isoperimetric_profile",
    "log_volume",
    "origin_volume",
    "scatter_logsumexp",
    "two_hop_shell_pairs",
]
