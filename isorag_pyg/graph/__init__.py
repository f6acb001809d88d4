"""The passage graph: named edge builders and their merge into a PyG ``Data``."""
from isorag_pyg.graph.builders import (
    context_cooccurrence,
    cooccurrence_edges,
    entity_comention,
    entity_mentions,
    knn,
    title_mention,
    train_cooccurrence,
)
from isorag_pyg.graph.corpus_graph import (
    BUILDER_NAMES,
    BUILDERS_VERSION,
    LEAKY_BUILDERS,
    EmptyGraphError,
    GraphEdges,
    build_corpus_graph,
    graph_statistics,
    run_builders,
)
from isorag_pyg.graph.noise import noise_edges

__all__ = [
    "BUILDERS_VERSION",
    "BUILDER_NAMES",
    "LEAKY_BUILDERS",
    "EmptyGraphError",
    "GraphEdges",
    "build_corpus_graph",
    "context_cooccurrence",
    "cooccurrence_edges",
    "entity_comention",
    "entity_mentions",
    "graph_statistics",
    "knn",
    "noise_edges",
    "run_builders",
    "title_mention",
    "train_cooccurrence",
]
