"""``isorag query --server URL``: the questions answered by a running ``isorag serve`` of the same
index, through the standard library's HTTP client (nothing of the retrieval stack is imported, and
the server's loaded model answers at once).

The server must serve the version saved in the index folder: its ``GET /info`` is checked against
the folder's manifest (corpus hash, encoder fingerprint, version) before anything is asked.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from isorag_pyg.store.layout import MANIFEST

#: Seconds to wait for the server's answer.
TIMEOUT_S = 60.0


def _call(url: str, body: dict[str, Any] | None = None) -> Any:
    """``GET url`` (``POST`` with a JSON ``body``): the JSON answer; a ``RuntimeError`` naming the
    server's own message for an HTTP error, or why it could not be reached."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        try:
            detail = json.loads(err.read()).get("detail", err.reason)
        except (ValueError, AttributeError):
            detail = err.reason
        raise RuntimeError(f"the server at {url} answered {err.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        raise RuntimeError(f"cannot reach a server at {url} ({getattr(err, 'reason', err)})") from None


def served_answers(server: str, index_dir: str | Path, questions: list[str], k: int, retriever: str) -> list[dict[str, Any]]:
    """One ``{"question", "results"}`` answer a question (``isorag query --json``'s objects) from the
    server at ``server``, once its ``/info`` shows it serves the version saved in ``index_dir``."""
    base = server.rstrip("/")
    try:
        saved = json.loads((Path(index_dir) / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{index_dir}: not a readable isorag index ({err})") from None
    info = _call(f"{base}/info")
    served = info.get("index", {}) if isinstance(info, dict) else {}
    if (served.get("corpus_hash"), served.get("encoder", {}).get("fingerprint")) != (saved.get("corpus_hash"), saved.get("encoder", {}).get("fingerprint")):
        raise ValueError(f"the server at {server} serves another index than {index_dir}; query without --server")
    if info.get("version") != saved.get("generation"):
        raise ValueError(f"the server at {server} serves version {info.get('version')} of {index_dir}, which holds version "
                         f"{saved.get('generation')}: POST /reload there, or query without --server")
    return _call(f"{base}/retrieve", {"questions": questions, "k": k, "retriever": retriever})
