"""The retrieval server: ``isorag serve INDEX_DIR`` (FastAPI + uvicorn) with dynamic
micro-batching.

* :class:`ServerSettings`: batching knobs and request limits;
* :class:`RetrievalEngine`: answers a batch of requests with one encoder call and one
  retrieval call per (retriever, k);
* :class:`MicroBatcher`: collects concurrent requests into batches for one worker thread;
* :func:`create_app`: the FastAPI app over a loaded :class:`~isorag_pyg.index.ISORAGIndex`;
* :func:`serve`: what the command runs.

Names are imported on first use, so the command line can read the settings' defaults
without importing FastAPI or torch.
"""
from isorag_pyg.lazy import lazy_attributes

__all__ = ["BatcherUnavailable", "MicroBatcher", "RetrievalEngine", "RetrievalRequest", "ServerSettings", "create_app", "serve"]
__getattr__ = lazy_attributes(__name__, {
    "BatcherUnavailable": "batcher", "MicroBatcher": "batcher", "RetrievalEngine": "engine", "RetrievalRequest": "engine",
    "ServerSettings": "settings", "create_app": "app", "serve": "runner",
})
