"""The QA prompt: question plus retrieved passages, as chat messages or, for a base model, one
completion prompt with few-shot examples. The templates the project ships (``default``: chat;
``fewshot``: a base model's completion prompt) are the package's ``qa/templates/*.yaml``, which
the benchmark harness's hydra configs read too (:func:`packaged_template`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isorag_pyg.datasets.types import Passage

#: One generation request: chat messages, or a prompt string for a completions endpoint.
Request = list[dict[str, str]] | str
#: Earlier turns of a conversation: ``{"role": "user" | "assistant", "content": ...}``, oldest first.
History = Sequence[dict[str, str]]
TEMPLATES = Path(__file__).with_name("templates")
#: Characters per token assumed when fitting a prompt into a reader's context window (a
#: deliberately low estimate: English text runs about 4 characters a token).
CHARS_PER_TOKEN = 3


@dataclass(frozen=True)
class PromptTemplate:
    """``user`` formatted with ``{passages}`` and ``{question}``; each passage rendered with
    ``passage`` (``{index}``, ``{title}``, ``{text}``) and joined by ``passage_separator``.

    With a ``system`` text a request is chat messages (system, user). Without one (``None``) it
    is a completion prompt for a base model: ``instruction``, then each of ``examples``
    (``{question, answer, passages: [{title, text}]}``) rendered like the question and followed
    by `` <answer>``, then the question, joined by ``example_separator``. Example answers are
    single lines, so a reader that stops at a newline ends where the examples do.
    ``passage_order``: ``ranked`` (best first) or ``reversed`` (best last, nearest the question);
    either way ``{index}`` is a passage's rank (1: the best), the number an answer cites it by.
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
        numbered = list(enumerate(passages, 1))
        order = numbered[::-1] if self.passage_order == "reversed" else numbered
        text = self.passage_separator.join(self.passage.format(index=i, title=p.title, text=p.text) for i, p in order)
        return self.user.format(passages=text, question=question).lstrip("\n")

    def prompt(self, question: str, passages: Sequence[Passage], history: History = ()) -> str:
        """The user text: instruction, worked examples, earlier turns (a base model's prompt:
        as questions answered without passages), then this question with its passages."""
        shots = [self._block(e["question"], [Passage("", p["title"], p["text"]) for p in e.get("passages", [])]) + " " + e["answer"]
                 for e in self.examples]
        turns = [self._block(q["content"], []) + " " + a["content"].replace("\n", " ")
                 for q, a in zip(history[::2], history[1::2])] if self.system is None else []
        parts = [self.instruction, *shots, *turns, self._block(question, list(passages))]
        return self.example_separator.join(part for part in parts if part)

    def request(self, question: str, passages: Sequence[Passage], history: History = ()) -> Request:
        """Chat messages when the template has a system text (earlier turns between the system
        text and this question), else the completion prompt."""
        if self.system is None:
            return self.prompt(question, passages, history)
        return [{"role": "system", "content": self.system}, *({"role": m["role"], "content": m["content"]} for m in history),
                {"role": "user", "content": self.prompt(question, passages)}]

    def fit(self, question: str, passages: Sequence[Passage], context_tokens: int | None, history: History = ()) -> tuple[list[Passage], int]:
        """The passages whose prompt fits ``context_tokens`` (estimated at :data:`CHARS_PER_TOKEN`;
        ``None``: no limit), and how many characters were cut: the lowest-ranked texts are
        shortened first, then dropped, the best passage kept (shortened) whatever the budget."""
        kept = list(passages)
        if context_tokens is None:
            return kept, 0
        budget = context_tokens * CHARS_PER_TOKEN

        def size(items: list[Passage]) -> int:
            request = self.request(question, items, history)
            return len(request) if isinstance(request, str) else sum(len(m["content"]) for m in request)

        over, cut = size(kept) - budget, 0
        while over > 0 and kept:
            last = kept[-1]
            if len(last.text) > over or len(kept) == 1:
                shorter = last.text[:max(0, len(last.text) - over)]
                kept[-1] = dataclasses.replace(last, text=shorter) if dataclasses.is_dataclass(last) else Passage(last.id, last.title, shorter)
                cut += len(last.text) - len(shorter)
                break
            kept.pop()
            cut += len(last.text)
            over = size(kept) - budget
        return kept, cut


def packaged_template(name: str) -> PromptTemplate:
    """A template the package ships, by name (``default``, ``fewshot``)."""
    import yaml

    path = TEMPLATES / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no prompt template {name!r}; the package ships {sorted(p.stem for p in TEMPLATES.glob('*.yaml'))}")
    fields = yaml.safe_load(path.read_text())
    return PromptTemplate(**{**fields, "examples": tuple(fields.get("examples") or ())})


def first_answer(text: str, stop: list[str] | None) -> str:
    """The answer in a generation: the text before the first stop string, stripped."""
    for marker in stop or ():
        text = text.split(marker, 1)[0]
    return text.strip()
