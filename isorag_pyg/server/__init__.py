"""The retrieval server: ``isorag serve INDEX_DIR`` (FastAPI + uvicorn) with dynamic
micro-batching. See ``docs/server.md``.

* :class:`ServerSettings`: batching knobs and request limits;
* :class:`RetrievalEngine`: answers a batch of requests with one encoder call and one
  retrieval call per (retriever, k);
* :class:`MicroBatcher`: collects concurrent requests into batches for one worker thread;
* :func:`create_app`: the FastAPI app over a loaded :class:`~isorag_pyg.index.ISORAGIndex`;
* :func:`serve`: what the command runs.

Names are imported on first use, so the command line can read the settings' defaults
without importing FastAPI or torch.
"""
from importlib import import_module
from typing import Any

_HOME = {
    "BatcherUnavailable": "batcher", "MicroBatcher": "batcher", "RetrievalEngine": "engine", "RetrievalRequest": "engine",
    "ServerSettings": "settings", "create_app": "app", "serve": "runner",
}
__all__ = ["BatcherUnavailable", "MicroBatcher", "RetrievalEngine", "RetrievalRequest", "ServerSettings", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'isorag_pyg.server' has no attribute {name!r}")
    return getattr(import_module(f"isorag_pyg.server.{_HOME[name]}"), name)
