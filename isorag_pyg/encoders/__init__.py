"""Text encoders and their embedding cache."""
from isorag_pyg.encoders.cache import EmbeddingCache, cache_key, default_cache_dir
from isorag_pyg.encoders.sentence import DEFAULT_ENCODER, SentenceEncoder, TextEncoder

__all__ = ["DEFAULT_ENCODER", "EmbeddingCache", "SentenceEncoder", "TextEncoder", "cache_key", "default_cache_dir"]
