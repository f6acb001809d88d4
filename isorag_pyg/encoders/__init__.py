"""Text encoders and their embedding cache."""
from isorag_pyg.encoders.embedding_cache import EmbeddingCache, cache_key, default_cache_dir
from isorag_pyg.encoders.sentence import SentenceEncoder, TextEncoder

__all__ = ["EmbeddingCache", "SentenceEncoder", "TextEncoder", "cache_key", "default_cache_dir"]
