"""Plain records shared by every dataset loader."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Passage:
    """One retrievable passage of a corpus."""

    id: str
    title: str
    text: str

    @property
    def content(self) -> str:
        """The string that is embedded and indexed: title, newline, text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass
class Question:
    """One multi-hop question with its gold passages (ids into the corpus)."""

    id: str
    text: str
    answers: list[str]
    gold_ids: list[str]
    context_ids: list[str] | None = None
    hop_type: str | None = None


@dataclass
class MatchReport:
    """How gold passages were matched to the corpus; nothing is dropped silently."""

    exact: int = 0
    title_only: int = 0
    casefold_fallback: int = 0
    ambiguous_title: int = 0
    unmatched: list[tuple[str, str]] = field(default_factory=list)
    unmatched_context: int = 0
    duplicate_passages: int = 0
    duplicate_ids: list[tuple[str, str]] = field(default_factory=list)  # (kept id, dropped id) of identical passages

    def summary(self) -> dict[str, int]:
        return {
            "gold_exact": self.exact,
            "gold_title_only": self.title_only,
            "gold_casefold_fallback": self.casefold_fallback,
            "gold_ambiguous_title": self.ambiguous_title,
            "gold_unmatched": len(self.unmatched),
            "context_unmatched": self.unmatched_context,
            "duplicate_passages_merged": self.duplicate_passages,
        }


@dataclass
class QADataset:
    """Questions plus the corpus they are asked over."""

    name: str
    questions: list[Question]
    corpus: list[Passage]
    report: MatchReport = field(default_factory=MatchReport)

    def passage_index(self) -> dict[str, int]:
        """Map passage id -> row in ``corpus`` (and in the graph)."""
        return {p.id: i for i, p in enumerate(self.corpus)}


def train_eval_overlap(eval_ds: QADataset | None, train_ds: QADataset | None) -> int:
    """How many training questions are also evaluation questions (same id or same text)."""
    if eval_ds is None or train_ds is None:
        return 0
    ids = {q.id for q in eval_ds.questions}
    texts = {q.text.strip().casefold() for q in eval_ds.questions}
    return sum(q.id in ids or q.text.strip().casefold() in texts for q in train_ds.questions)
