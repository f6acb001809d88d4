"""Text encoders and their embedding cache.

Names are imported on first use, so that the cache's file housekeeping
(:mod:`~isorag_pyg.encoders.cache_files`, ``isorag cache``) does not import torch.
"""
from isorag_pyg.lazy import lazy_attributes

__all__ = ["EmbeddingCache", "SentenceEncoder", "TextEncoder", "cache_key", "default_cache_dir"]
__getattr__ = lazy_attributes(__name__, {
    "EmbeddingCache": "embedding_cache", "cache_key": "embedding_cache", "default_cache_dir": "cache_files",
    "SentenceEncoder": "sentence", "TextEncoder": "sentence",
})
