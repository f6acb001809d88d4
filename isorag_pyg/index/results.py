"""What a question gets back: retrieved passages with their scores, the JSON answer shared by
``isorag query --json`` and the server's ``POST /retrieve`` (so that the two cannot drift apart),
and ISO-RAG's explained trace."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from isorag_pyg.datasets.types import Passage


@dataclass(frozen=True)
class RetrievedPassage:
    """One retrieved passage with its score (higher is better; a result's order is the ranking,
    where ISO-RAG puts a near-duplicate of a better passage after the rest, whatever its score)."""

    id: str
    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def retrieved_passages(passages: Sequence[Passage], indices: Tensor, scores: Tensor) -> list[list[RetrievedPassage]]:
    """Corpus rows (``-1``: none) and scores as passages, one list per question."""
    out = []
    for rows, values in zip(indices.tolist(), scores.tolist()):
        out.append([RetrievedPassage(p.id, p.title, p.text, float(s)) for p, s in ((passages[r], s) for r, s in zip(rows, values) if r >= 0)])
    return out


def answer_json(question: str, hits: Sequence[RetrievedPassage]) -> dict[str, Any]:
    """``{"question": ..., "results": [{"id", "title", "text", "score"}, ...]}``, best first."""
    return {"question": question, "results": [hit.to_dict() for hit in hits]}


#: How an entity node is named beside passage ids (``entity:<name>``): passage ids may not start with it.
ENTITY_NODE_PREFIX = "entity:"


def node_records(passages: Sequence[Passage], entity_names: Sequence[str], rows: Iterable[int]) -> list[tuple[str, str, str]]:
    """(id, title, text) of graph nodes: a passage's own for rows ``< len(passages)``, else the
    entity node's (``"entity:<name>"``, name, ``""``) of an entity graph."""
    n = len(passages)
    out = []
    for r in rows:
        if r < n:
            p = passages[r]
            out.append((p.id, p.title, p.text))
        else:
            out.append((f"{ENTITY_NODE_PREFIX}{entity_names[r - n]}", entity_names[r - n], ""))
    return out


def nodes_by_row(passages: Sequence[Passage], entity_names: Sequence[str], rows: Iterable[int]) -> dict[int, tuple[str, str, str]]:
    """Each distinct graph row of ``rows`` -> its (id, title, text) (:func:`node_records`)."""
    distinct = sorted(set(rows))
    return dict(zip(distinct, node_records(passages, entity_names, distinct)))


def explained(trace: dict[str, Any], passages: Sequence[Passage], question: str, png_path: str | Path | None = None,
              entity_names: Sequence[str] = ()) -> dict[str, Any]:
    """An ISO-RAG trace (graph rows) with nodes by id (:func:`node_records`: an entity graph's
    entity nodes as ``entity:<name>``) and every candidate's title (``titles``); with
    ``png_path``, the case-study picture of the question's local graph is drawn there."""
    named = nodes_by_row(passages, entity_names, trace["candidates"] + [r for r, _ in trace["top"]])  # a hybrid's top may hold others
    titles = {r: title for r, (_, title, _) in named.items()}
    if png_path is not None:
        from isorag_pyg.retrieval.trace_plot import plot_case_study  # matplotlib: only to draw

        plot_case_study(trace, set(), titles, question, png_path, len(passages))
    ids = {r: pid for r, (pid, _, _) in named.items()}
    return {
        "question": question,
        "seeds": [ids[r] for r in trace["seeds"]],
        "entity_seeds": [ids[r] for r in trace.get("entity_seeds", [])],
        "candidates": [ids[r] for r in trace["candidates"]],
        "kept_edges": [[ids[u], ids[v]] for u, v in trace["kept_edges"]],
        "pruned_edges": [[ids[u], ids[v]] for u, v in trace["pruned_edges"]],
        "ppr": {ids[r]: mass for r, mass in trace["ppr"].items()},
        "top": [{"id": ids[r], "title": titles[r], "score": score} for r, score in trace["top"]],
        "titles": {ids[r]: titles[r] for r in trace["candidates"]},
    }
