"""One question answered by a reader over its retrieved passages: the prompt (numbered passages,
fitted into the reader's context window), the answer streamed or whole, its citations, and the
JSON object that ``ISORAGIndex.answer``, ``isorag ask --json`` and the server's ``POST /answer``
all give::

    {"question", "answer", "citations": [{"n", "id", "title", "by"}], "passages": [{"n", "id", "title", "text", "score"}],
     "timings": {"retrieval_s", "reader_s", "first_token_s", "prompt_tokens", "completion_tokens", "truncated", ...}}
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from isorag_pyg.qa.citations import citations
from isorag_pyg.qa.prompt import History, first_answer
from isorag_pyg.qa.reader_spec import Reader

log = logging.getLogger(__name__)


def passages_json(hits: Sequence[Any]) -> list[dict[str, Any]]:
    """The retrieved passages, numbered as the prompt and the citations number them."""
    return [{"n": n, "id": h.id, "title": h.title, "text": h.text, "score": float(getattr(h, "score", 0.0))} for n, h in enumerate(hits, 1)]


def answer_json(question: str, answer: str, hits: Sequence[Any], in_prompt: int, timings: dict[str, Any]) -> dict[str, Any]:
    """The answer object: ``citations`` are the passages among the first ``in_prompt`` (those the
    reader saw) that ``answer`` cites, in the order cited (``"by": "marker"``); a group of markers
    whose passages do not hold its claim while another does, and an answer without markers, cite
    the best-ranked passage that contains the claim (the answer), all of its words, or the words
    it adds to the question (``"by": "match"``, :func:`~isorag_pyg.qa.citations.citations`)."""
    cited = [{"n": n, "id": hits[n - 1].id, "title": hits[n - 1].title, "by": by}
             for n, by in citations(answer, [f"{h.title} {h.text}" for h in hits[:in_prompt]], question)]
    return {"question": question, "answer": answer, "citations": cited, "passages": passages_json(hits), "timings": timings}


class Answering:
    """One question being answered: :meth:`pieces` streams the answer's text as the reader
    generates it; :attr:`result` is then the answer object; :meth:`cancel` (from any thread)
    ends the reader's request. ``history``: earlier turns of a conversation."""

    def __init__(self, reader: Reader, question: str, hits: Sequence[Any], retrieval_s: float = 0.0, history: History = ()):
        self.reader, self.question, self.hits = reader, question, list(hits)
        self.request, kept, cut = reader.request(question, self.hits, history)
        self.timings: dict[str, Any] = {"retrieval_s": retrieval_s, "reader_s": None, "first_token_s": None, "prompt_tokens": None,
                                        "completion_tokens": None, "truncated": cut > 0, "passages_in_prompt": len(kept), "cut_chars": cut}
        if cut:
            log.warning("the passages were cut by %d characters to fit the reader's context window (%d of %d passages in the prompt)",
                        cut, len(kept), len(self.hits))
        self.result: dict[str, Any] | None = None
        self._stream: Any = None
        self._cancelled = False

    def pieces(self) -> Iterator[str]:
        """The answer's text pieces as they come: joined, they are the answer (leading space and
        anything from a stop string on left out)."""
        start, text, shown = time.perf_counter(), "", ""
        self._stream = self.reader.stream(self.request)
        if self._cancelled:
            self._stream.close()
        for piece in self._stream:
            if self.timings["first_token_s"] is None:
                self.timings["first_token_s"] = time.perf_counter() - start
            text += piece
            visible = first_answer(text, self.reader.stop)
            if len(visible) > len(shown) and visible.startswith(shown):
                yield visible[len(shown):]
                shown = visible
        self.timings.update(reader_s=time.perf_counter() - start, prompt_tokens=self._stream.prompt_tokens,
                            completion_tokens=self._stream.completion_tokens)
        self.result = answer_json(self.question, first_answer(text, self.reader.stop), self.hits, self.timings["passages_in_prompt"],
                                  self.timings)

    def run(self) -> dict[str, Any]:
        """The whole answer object (the pieces streamed and joined)."""
        for _ in self.pieces():
            pass
        assert self.result is not None
        return self.result

    def cancel(self) -> None:
        """End the reader's request (the client went away)."""
        self._cancelled = True
        if self._stream is not None:
            self._stream.close()


def answer_all(reader: Reader, questions: Sequence[str], hits: Sequence[Sequence[Any]], retrieval_s: float) -> list[dict[str, Any]]:
    """Every question's answer object, the requests sent together (the reader's own concurrency),
    as the benchmark harness sends them; ``retrieval_s`` is shared out evenly."""
    asked = [Answering(reader, q, h, retrieval_s / max(1, len(questions))) for q, h in zip(questions, hits)]
    start = time.perf_counter()
    records = reader.generate([a.request for a in asked])
    reader_s = (time.perf_counter() - start) / max(1, len(asked))
    out = []
    for a, record in zip(asked, records):
        a.timings.update(reader_s=reader_s, prompt_tokens=record.get("prompt_tokens"))
        out.append(answer_json(a.question, record["answer"], a.hits, a.timings["passages_in_prompt"], a.timings))
    return out
