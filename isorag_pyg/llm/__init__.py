"""An index as a remote backend for PyG's :class:`torch_geometric.llm.RAGQueryLoader`.

The feature store finds the dense pool (cosine seeds first), the graph store builds ISO-RAG's
local candidate graph around it, and the subgraph filter applies the isoperimetric filter
(:class:`~isorag_pyg.transforms.IsoperimetricFilter`, φ from the index) and local PPR::

    from torch_geometric.llm import RAGQueryLoader
    feature_store, graph_store, subgraph_filter = rag_components(index, k=5)
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query("question")
    data.passage_id, data.edge_index, data.ppr, data.score, data.rank   # the filtered local graph, scored and ranked

``data.node_idx`` ordered by ``data.rank`` (its entries 0 to ``k - 1``) is what
:meth:`ISORAGIndex.retrieve` returns: ranked by ``data.score``, near-duplicates after the rest
(the knob ``near_duplicate_cosine``) with the walk alone: an index whose ranking is a hybrid
with BM25 (the knob ``lexical_weight``, documentation that writes code) ranks the loader's local
graph without it, a warning says so, and ``lexical_weight`` given here is an error.
The loader asks one query at a time; the graph store reads that query's dense candidates (exact
or from the index's ANN) from the feature store it is registered with.

The three parts, one a module: :class:`ISORAGFeatureStore`, :class:`ISORAGGraphStore`,
:class:`ISOSubgraphFilter`.
"""
from __future__ import annotations

import logging
from typing import Any

from isorag_pyg.defaults import K
from isorag_pyg.index.index import ISORAGIndex
from isorag_pyg.llm.feature_store import ISORAGFeatureStore
from isorag_pyg.llm.graph_store import ISORAGGraphStore
from isorag_pyg.llm.subgraph_filter import ISOSubgraphFilter

__all__ = ["ISORAGFeatureStore", "ISORAGGraphStore", "ISOSubgraphFilter", "rag_components"]

log = logging.getLogger(__name__)


def rag_components(index: ISORAGIndex, k: int = K, **knobs: Any) -> tuple[ISORAGFeatureStore, ISORAGGraphStore, ISOSubgraphFilter]:
    """Feature store, graph store and subgraph filter for ``RAGQueryLoader``, all with the same
    ISO-RAG knobs (the index's stored ones, then ``knobs``, without the hybrid with BM25:
    the loader ranks its local graph); retrieval runs on the CPU."""
    if knobs.get("lexical_weight"):
        raise ValueError("lexical_weight: the loader ranks ISO-RAG's local graph; the hybrid with BM25 is index.retrieve's")
    if index.knobs.get("iso", {}).get("lexical_weight"):
        log.warning("this index ranks by a hybrid with BM25 (lexical_weight); the loader ranks the walk's local graph alone")
    retriever = index.retriever("iso", device="cpu", **{**knobs, "lexical_weight": 0.0})
    return ISORAGFeatureStore(index, retriever, k), ISORAGGraphStore(retriever), ISOSubgraphFilter(retriever)
