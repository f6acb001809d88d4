"""The QA prompt: question plus retrieved passages, as chat messages or, for a base model, one
completion prompt with few-shot examples."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from isorag_pyg.datasets.types import Passage

#: One generation request: chat messages, or a prompt string for a completions endpoint.
Request = list[dict[str, str]] | str


@dataclass(frozen=True)
class PromptTemplate:
    """``user`` formatted with ``{passages}`` and ``{question}``; each passage rendered with
    ``passage`` (``{index}``, ``{title}``, ``{text}``) and joined by ``passage_separator``.

    With a ``system`` text a request is chat messages (system, user). Without one (``None``) it
    is a completion prompt for a base model: ``instruction``, then each of ``examples``
    (``{question, answer, passages: [{title, text}]}``) rendered like the question and followed
    by `` <answer>``, then the question, joined by ``example_separator``. Example answers are
    single lines, so a reader that stops at a newline ends where the examples do.
    ``passage_order``: ``ranked`` (best first) or ``reversed`` (best last, nearest the question).
    """

    user: str
    passage: str
    system: str | None = None
    passage_separator: str = "\n\n"
    instruction: str = ""
    examples: tuple[dict[str, Any], ...] = ()
    example_separator: str = "\n\n"
    passage_order: str = "ranked"

    def __post_init__(self) -> None:
        if self.passage_order not in ("ranked", "reversed"):
            raise ValueError(f"passage_order must be 'ranked' or 'reversed', got {self.passage_order!r}")
        for example in self.examples:
            if not {"question", "answer"} <= set(example) or "\n" in example["answer"]:
                raise ValueError(f"a few-shot example needs 'question' and a one-line 'answer': {example!r}")

    def _block(self, question: str, passages: list[Passage]) -> str:
        order = passages[::-1] if self.passage_order == "reversed" else passages
        text = self.passage_separator.join(self.passage.format(index=i + 1, title=p.title, text=p.text) for i, p in enumerate(order))
        return self.user.format(passages=text, question=question).lstrip("\n")

    def prompt(self, question: str, passages: list[Passage]) -> str:
        """The user text: instruction, worked examples, then this question with its passages."""
        shots = [self._block(e["question"], [Passage("", p["title"], p["text"]) for p in e.get("passages", [])]) + " " + e["answer"]
                 for e in self.examples]
        parts = [self.instruction, *shots, self._block(question, passages)]
        return self.example_separator.join(part for part in parts if part)

    def request(self, question: str, passages: list[Passage]) -> Request:
        """Chat messages when the template has a system text, else the completion prompt."""
        if self.system is None:
            return self.prompt(question, passages)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.prompt(question, passages)}]


def first_answer(text: str, stop: list[str] | None) -> str:
    """The answer in a generation: the text before the first stop string, stripped."""
    for marker in stop or ():
        text = text.split(marker, 1)[0]
    return text.strip()
