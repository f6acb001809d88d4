"""The passages that alone tie unrelated regions of an index's graph together, as a report: the
strongest bridges by bridging score (:mod:`~isorag_pyg.utils.bridging`), what each ties, and
whether the walk leaves it out. Corpus poisoning that ties the entities of many questions to one
injected passage shows up here first; so do legitimate hub passages (lists, disambiguations)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from torch import Tensor

from isorag_pyg.datasets.types import Passage
from isorag_pyg.index.results import node_records
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.utils.bridging import bridge_mask, profile_change
from isorag_pyg.utils.isoperimetric import origin_volume

#: Neighbours named per reported passage: those whose profile it inflates most.
TIES_SHOWN = 8


@dataclass(frozen=True)
class Bridge:
    """One passage of the report: its bridging score, the neighbours (entity names, passage
    titles) whose profiles it inflates most, and whether the walk leaves it out (``left_out``:
    among the ISO-RAG knob ``bridge_share`` of highest scores, walked only for the questions one of
    whose seeds names it by a specific title; ``quarantined``: by a user, for every question)."""

    id: str
    title: str
    score: float
    ties: list[str]
    left_out: bool
    quarantined: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def strongest_bridges(passages: Sequence[Passage], graph: Any, log_vol: Tensor, phi: PhiSpec, bridging: Tensor, bridge_share: float,
                      quarantined: Sequence[str], top: int = 10, rows: list[int] | None = None) -> list[Bridge]:
    """The ``top`` passages by ``bridging`` score (or the passages ``rows``), highest first, in the
    index's ``graph`` (volumes ``log_vol`` and φ's recipe ``phi``); ``left_out`` marks the ISO-RAG
    knob ``bridge_share`` of highest scores."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be a non-negative integer, got {top!r}")
    n = len(passages)
    scores = bridging[:n]
    chosen = rows if rows is not None else [r for r in scores.topk(min(top, n)).indices.tolist() if scores[r] > float("-inf")]
    if not chosen:
        return []
    edges, delta = profile_change(graph.edge_index, log_vol, phi.eps, phi.shell_floor, origin_volume(phi.p))
    left_out = bridge_mask(scores, bridge_share, n)
    names = getattr(graph, "entity_names", [])
    report = []
    for row in sorted(chosen, key=lambda r: -float(scores[r])):
        into = edges[1] == row
        neighbours = edges[0][into][delta[into].argsort(descending=True)][:TIES_SHOWN].tolist()
        passage = passages[row]
        ties = [title or pid for pid, title, _ in node_records(passages, names, neighbours)]
        report.append(Bridge(passage.id, passage.title, round(float(scores[row]), 4), ties, bool(left_out[row]), passage.id in quarantined))
    return report
