"""The passage graph: named edge builders and their merge into a PyG ``Data``."""
from isorag_pyg.graph.builders import context_cooccurrence, cooccurrence_edges, knn, title_mention, train_cooccurrence
from isorag_pyg.graph.corpus_graph import (
    BUILDER_NAMES,
    LEAKY_BUILDERS,
    EmptyGraphError,
    build_corpus_graph,
    graph_statistics,
    run_builders,
)

__all__ = [
    "BUILDER_NAMES",
    "EmptyGraphError",
    "LEAKY_BUILDERS",
    "build_corpus_graph",
    "context_cooccurrence",
    "cooccurrence_edges",
    "graph_statistics",
    "knn",
    "run_builders",
    "title_mention",
    "train_cooccurrence",
]
