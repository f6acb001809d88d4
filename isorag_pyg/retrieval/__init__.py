"""Retrievers: ISO-RAG and the baselines, one interface (``retrieve(queries, k)``)."""
from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.retrieval.baselines import (
    BM25Retriever,
    DenseRetriever,
    GlobalPPRRetriever,
)
from isorag_pyg.retrieval.hipporag import HippoRAGRetriever
from isorag_pyg.retrieval.iso_retriever import ISORetriever
from isorag_pyg.retrieval.local_graph import LocalGraphBatch, build_local_graphs
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.retrieval.types import Queries, RetrievalResult, Retriever

__all__ = [
    "ANNIndex",
    "BM25Retriever",
    "DenseRetriever",
    "GlobalPPRRetriever",
    "HippoRAGRetriever",
    "ISORetriever",
    "LocalGraphBatch",
    "Queries",
    "RetrievalGraph",
    "RetrievalResult",
    "Retriever",
    "build_local_graphs",
]
