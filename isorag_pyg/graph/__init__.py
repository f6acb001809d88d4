"""The passage graph: named edge builders and their merge into a PyG ``Data``.

Its names are imported on first use, so that the modules that match questions to an index's
entity nodes (:mod:`~isorag_pyg.graph.query_entities`) import neither the builders nor PyG."""
from isorag_pyg.lazy import lazy_attributes

__all__ = ["BUILDERS_VERSION", "BUILDER_NAMES", "LEAKY_BUILDERS", "EmptyGraphError", "GraphEdges", "build_corpus_graph",
           "context_cooccurrence", "cooccurrence_edges", "entity_comention", "entity_mentions", "graph_statistics", "knn",
           "noise_edges", "run_builders", "title_mention", "train_cooccurrence"]
__getattr__ = lazy_attributes(__name__, {
    **dict.fromkeys(["context_cooccurrence", "cooccurrence_edges", "entity_comention", "entity_mentions", "knn", "title_mention",
                     "train_cooccurrence"], "builders"),
    **dict.fromkeys(["BUILDERS_VERSION", "BUILDER_NAMES", "LEAKY_BUILDERS", "EmptyGraphError", "GraphEdges", "build_corpus_graph",
                     "graph_statistics", "run_builders"], "corpus_graph"),
    "noise_edges": "noise",
})
