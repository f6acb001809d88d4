"""Seeded, label-free noise for a passage graph: hub shortcuts and random shortcut edges.

Used to measure how retrieval degrades when the graph is noisy (the noise benchmark). The
noise depends only on the number of passages, the clean edge count and the seed, never on
questions or gold labels.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def resolve_count(value: float, num_nodes: int, name: str) -> int:
    """``value`` passages: a count when ``>= 1``, a share of the corpus when in ``(0, 1)``."""
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if 0 < value < 1:
        return round(value * num_nodes)
    if value != int(value):
        raise ValueError(f"{name} must be a whole count (>= 1) or a share of the corpus in (0, 1), got {value}")
    return int(value)


def noise_edges(
    num_nodes: int,
    clean_edges: int,
    hubs: float = 0,
    hub_degree: float = 0,
    random_ratio: float = 0.0,
    seed: int = 0,
) -> tuple[Tensor, dict[str, Any]]:
    """Noise edges over ``num_nodes`` passages, and a record of what was added.

    * hub shortcuts: ``hubs`` passages chosen at random, each linked to ``hub_degree`` distinct
      random other passages (each a count, or a share of the corpus when in ``(0, 1)``);
    * random shortcuts: ``round(random_ratio * clean_edges)`` edges between uniformly random
      pairs of distinct passages (``clean_edges``: the undirected edge count of the graph the
      noise is added to).

    Everything is drawn from one generator seeded with ``seed``. Returns ``[2, E]`` directed
    pairs (one direction; the graph builder symmetrises) and a record with the resolved counts.
    """
    if random_ratio < 0:
        raise ValueError(f"random_ratio must be >= 0, got {random_ratio}")
    num_hubs = min(resolve_count(hubs, num_nodes, "hubs"), num_nodes)
    degree = min(resolve_count(hub_degree, num_nodes, "hub_degree"), max(num_nodes - 1, 0))
    num_random = round(random_ratio * clean_edges) if num_nodes > 1 else 0
    generator = torch.Generator().manual_seed(seed)
    parts = []
    hub_rows = torch.randperm(num_nodes, generator=generator)[:num_hubs] if degree else torch.empty(0, dtype=torch.long)
    for hub in hub_rows.tolist():
        # `degree` distinct passages other than the hub: a permutation of the others
        others = torch.randperm(num_nodes - 1, generator=generator)[:degree]
        others = others + (others >= hub).long()
        parts.append(torch.stack([torch.full_like(others, hub), others]))
    if num_random:
        u = torch.randint(num_nodes, (num_random,), generator=generator)
        v = (u + torch.randint(1, num_nodes, (num_random,), generator=generator)) % num_nodes  # never u
        parts.append(torch.stack([u, v]))
    edges = torch.cat(parts, dim=1) if parts else torch.empty(2, 0, dtype=torch.long)
    record = {"hubs": len(hub_rows), "hub_degree": degree if len(hub_rows) else 0, "random_edges": num_random,
              "random_ratio": float(random_ratio), "seed": int(seed), "clean_edges": int(clean_edges)}
    return edges, record
