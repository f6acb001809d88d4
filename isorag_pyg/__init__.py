"""ISO-RAG for PyTorch Geometric: isoperimetric noise control for graph retrieval."""
__version__ = "0.1.0"
