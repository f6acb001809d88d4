"""The ISO-RAG index: build, save, load and query a corpus; PyG RAG stores over it."""
from isorag_pyg.index.corpus import corpus_hash
from isorag_pyg.index.index import ISORAGIndex, open_index
from isorag_pyg.index.registry import RETRIEVERS
from isorag_pyg.index.results import RetrievedPassage
from isorag_pyg.store.layout import FORMAT_VERSION, IndexFormatError

__all__ = ["FORMAT_VERSION", "RETRIEVERS", "ISORAGIndex", "IndexFormatError", "RetrievedPassage", "corpus_hash", "open_index"]
