"""The JSON answer for one question, shared by ``isorag query --json`` and the server's
``POST /retrieve`` so that the two cannot drift apart."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from isorag_pyg.index.index import RetrievedPassage


def answer_json(question: str, hits: Sequence[RetrievedPassage]) -> dict[str, Any]:
    """``{"question": ..., "results": [{"id", "title", "text", "score"}, ...]}``, best first."""
    return {"question": question, "results": [hit.to_dict() for hit in hits]}
