"""Pure functions on graphs and ball coordinates."""
from isorag_pyg.utils.isoperimetric import (
    ablate_log_phi,
    check_beta,
    clean_edge_index,
    isoperimetric_keep_mask,
    log_conformal_factor,
    log_isoperimetric_profile,
    log_phi_from_ball,
    log_volume,
    origin_volume,
    scatter_logsumexp,
    two_hop_shell_pairs,
)
from isorag_pyg.utils.near_duplicates import near_duplicates_last

__all__ = [
    "ablate_log_phi",
    "check_beta",
    "clean_edge_index",
    "isoperimetric_keep_mask",
    "log_conformal_factor",
    "log_isoperimetric_profile",
    "log_phi_from_ball",
    "log_volume",
    "near_duplicates_last",
    "origin_volume",
    "scatter_logsumexp",
    "two_hop_shell_pairs",
]
