"""The corpus as a PyG :class:`~torch_geometric.data.Data` graph, and its statistics."""
from __future__ import annotations

import logging
from typing import Any, Mapping

import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, degree, remove_self_loops, to_undirected

from isorag_pyg.datasets.types import Passage, QADataset
from isorag_pyg.graph import builders

log = logging.getLogger(__name__)

#: Builders whose edges come from the evaluated questions themselves.
LEAKY_BUILDERS = frozenset({"context_cooccurrence"})
BUILDER_NAMES = ("context_cooccurrence", "train_cooccurrence", "title_mention", "knn")


class EmptyGraphError(ValueError):
    """The builders produced no edge, so there is nothing to train f_θ on."""


def run_builders(
    spec: Mapping[str, Mapping[str, Any] | None],
    corpus: list[Passage],
    x: torch.Tensor,
    eval_questions: QADataset | None = None,
    train_questions: QADataset | None = None,
) -> dict[str, torch.Tensor]:
    """Run each named builder in ``spec`` (name -> keyword arguments) and return its edges."""
    edges: dict[str, torch.Tensor] = {}
    for name, kwargs in spec.items():
        kwargs = dict(kwargs or {})
        if name == "context_cooccurrence":
            if eval_questions is None:
                raise ValueError("context_cooccurrence needs the evaluation questions")
            edges[name] = builders.context_cooccurrence(corpus, eval_questions)
            log.warning("graph builder context_cooccurrence uses the evaluated questions' contexts: this is a LEAK")
        elif name == "train_cooccurrence":
            if train_questions is None:
                raise ValueError("train_cooccurrence needs training questions (dataset.train_questions)")
            edges[name], found = builders.train_cooccurrence(corpus, train_questions)
            log.info("train_cooccurrence: %d training context passages found in the corpus", found)
        elif name == "title_mention":
            edges[name] = builders.title_mention(corpus, **kwargs)
        elif name == "knn":
            edges[name] = builders.knn(x, **kwargs)
        else:
            raise ValueError(f"unknown graph builder {name!r}; choose from {', '.join(BUILDER_NAMES)}")
    return edges


def build_corpus_graph(corpus: list[Passage], x: torch.Tensor, edges: Mapping[str, torch.Tensor]) -> Data:
    """Merge builder edges into one undirected, coalesced, self-loop-free graph.

    ``edge_weight`` counts the builders that produced an edge (each direction counted once);
    ``edge_source`` is a bitmask over ``data.builders`` (bit ``i`` for builder ``i``).
    """
    n = len(corpus)
    if n == 0:
        raise ValueError("cannot build a graph over an empty corpus")
    if x.dim() != 2 or x.size(0) != n:
        raise ValueError(f"x must be [num_passages={n}, dim], got {tuple(x.shape)}")
    names = list(edges)
    parts, masks = [], []
    for bit, name in enumerate(names):
        ei = edges[name]
        if ei.numel() and (ei.min() < 0 or ei.max() >= n):
            raise ValueError(f"builder {name!r} produced node ids outside [0, {n})")
        ei, _ = remove_self_loops(to_undirected(ei, num_nodes=n))
        parts.append(ei)
        masks.append(torch.full((ei.size(1),), 1 << bit, dtype=torch.long))
    edge_index = torch.cat(parts, dim=1) if parts else torch.empty(2, 0, dtype=torch.long)
    source = torch.cat(masks) if masks else torch.empty(0, dtype=torch.long)
    weight = torch.ones(source.numel())
    edge_index, (weight, source) = coalesce(edge_index, [weight, source], num_nodes=n, reduce="sum")
    leak = any(name in LEAKY_BUILDERS for name in names)
    data = Data(x=x, edge_index=edge_index, edge_weight=weight, edge_source=source, num_nodes=n)
    data.passage_id = [p.id for p in corpus]
    data.builders = names
    data.leak = leak
    return data


def graph_statistics(data: Data) -> dict[str, Any]:
    """Nodes, undirected edges, isolated nodes, degree percentiles, share of edges per builder."""
    n = data.num_nodes
    deg = degree(data.edge_index[0], n) if data.edge_index.numel() else torch.zeros(n)
    num_directed = data.edge_index.size(1)
    stats: dict[str, Any] = {
        "nodes": n,
        "edges": num_directed // 2,
        "isolated_nodes": int((deg == 0).sum()),
        "leak": bool(getattr(data, "leak", False)),
    }
    for q in (50, 90, 99):
        stats[f"degree_p{q}"] = float(torch.quantile(deg.float(), q / 100)) if n else 0.0
    stats["degree_max"] = float(deg.max()) if n else 0.0
    for bit, name in enumerate(getattr(data, "builders", [])):
        has = ((data.edge_source >> bit) & 1).bool()
        stats[f"edge_share_{name}"] = float(has.float().mean()) if num_directed else 0.0
    return stats
