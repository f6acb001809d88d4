"""What an entity extractor returns, and the protocol every extractor follows (the rule-based
one and the LLM OpenIE one), so the entity graph builder takes either."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

#: One relation extracted from a passage: (subject, relation, object), raw strings.
Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Extraction:
    """Per passage, in corpus order: the raw (un-normalised) entity strings it mentions and the
    triples extracted from it (empty lists where an extractor has none); and how many entities
    and triples the extractor dropped as not found in their passage (``ungrounded``: OpenIE's
    grounding; empty for an extractor that drops nothing)."""

    entities: list[list[str]]
    triples: list[list[Triple]] = field(default_factory=list)
    ungrounded: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.triples and len(self.triples) != len(self.entities):
            raise ValueError(f"{len(self.entities)} entity lists but {len(self.triples)} triple lists")


@runtime_checkable
class EntityExtractor(Protocol):
    """Anything with a ``name`` and ``extract(texts) -> Extraction`` (one entry per text)."""

    name: str

    def extract(self, texts: Sequence[str]) -> Extraction:
        ...
