"""An index on disk: one directory of checksummed files (a JSON manifest, passages as JSON lines,
tensors as safetensors; nothing unpickled), written atomically under a writer lock and read back
from one opened version. :func:`~isorag_pyg.store.storage.save_index` and
:func:`~isorag_pyg.store.storage.load_index` map an index's contents to and from those files."""
from isorag_pyg.store.layout import FORMAT_VERSION, IndexFormatError
from isorag_pyg.store.locking import IndexLockTimeout, StaleIndexError

__all__ = ["FORMAT_VERSION", "IndexFormatError", "IndexLockTimeout", "StaleIndexError"]
