"""The fixed QA prompt: question plus retrieved passages, as chat messages."""
from __future__ import annotations

from dataclasses import dataclass

from isorag_pyg.datasets.types import Passage


@dataclass(frozen=True)
class PromptTemplate:
    """``system`` as is; ``user`` formatted with ``{passages}`` and ``{question}``; each passage
    rendered with ``passage`` (``{index}``, ``{title}``, ``{text}``)."""

    system: str
    user: str
    passage: str

    def messages(self, question: str, passages: list[Passage]) -> list[dict[str, str]]:
        block = "\n\n".join(self.passage.format(index=i + 1, title=p.title, text=p.text) for i, p in enumerate(passages))
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user.format(passages=block, question=question)}]
