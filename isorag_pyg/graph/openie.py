"""Open information extraction through any OpenAI-compatible LLM endpoint, HippoRAG-style: the
named entities of each passage first, then its (subject, relation, object) triples given those
entities. Requests go through :class:`~isorag_pyg.qa.OpenAIChatGenerator` (concurrent, retried
with backoff, every answer appended to an on-disk cache keyed by model, prompt and passage text,
so a rerun resumes where an interrupted one stopped)."""
from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from isorag_pyg.encoders.embedding_cache import default_cache_dir
from isorag_pyg.graph.extraction import Extraction, Triple
from isorag_pyg.graph.text import normalize_entity
from isorag_pyg.qa.generators import GeneratorError, OpenAIChatGenerator

log = logging.getLogger(__name__)

NER_INSTRUCTION = "Extract the named entities (people, places, organisations, works, dates, numbers) of each passage as a JSON list."
TRIPLE_INSTRUCTION = "Extract the facts of each passage as a JSON list of [subject, relation, object] triples, using its named entities."
EXAMPLES = (
    {
        "passage": "Radio City is India's first private FM radio station and was started on 3 July 2001. It plays Hindi, English and regional songs.",
        "entities": ["Radio City", "India", "3 July 2001", "Hindi", "English"],
        "triples": [["Radio City", "located in", "India"], ["Radio City", "is", "private FM radio station"],
                    ["Radio City", "started on", "3 July 2001"], ["Radio City", "plays songs in", "Hindi"],
                    ["Radio City", "plays songs in", "English"]],
    },
    {
        "passage": "Blue Harbour is a 1998 novel by Irish writer Maeve Dunne, set in Cork.",
        "entities": ["Blue Harbour", "1998", "Maeve Dunne", "Cork"],
        "triples": [["Blue Harbour", "published in", "1998"], ["Blue Harbour", "written by", "Maeve Dunne"],
                    ["Maeve Dunne", "nationality", "Irish"], ["Blue Harbour", "set in", "Cork"]],
    },
)
_QUOTED = re.compile(r'"([^"\n]+)"')
_QUOTED_TRIPLE = re.compile(r'\[\s*"([^"\n]+)"\s*,\s*"([^"\n]+)"\s*,\s*"([^"\n]+)"\s*\]')
_INNER_LIST = re.compile(r"\[([^\[\]\n]*)\]")


class OpenIEError(RuntimeError):
    """OpenIE could not finish: the endpoint failed, or too many answers were unparseable."""


def ner_prompt(text: str) -> str:
    """Few-shot completion prompt whose answer is the passage's entities, one JSON line."""
    shots = [f"Passage: {e['passage']}\nEntities: {json.dumps(e['entities'])}" for e in EXAMPLES]
    return "\n\n".join([NER_INSTRUCTION, *shots, f"Passage: {_one_line(text)}\nEntities:"])


def triple_prompt(text: str, entities: list[str]) -> str:
    """Few-shot completion prompt whose answer is the passage's triples, one JSON line."""
    shots = [f"Passage: {e['passage']}\nEntities: {json.dumps(e['entities'])}\nTriples: {json.dumps(e['triples'])}" for e in EXAMPLES]
    return "\n\n".join([TRIPLE_INSTRUCTION, *shots, f"Passage: {_one_line(text)}\nEntities: {json.dumps(entities)}\nTriples:"])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _first_list(answer: str) -> list[Any] | None:
    """The first JSON (or Python-literal) list in ``answer``, else ``None``."""
    start = answer.find("[")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(answer, start)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(answer[start:answer.rfind("]") + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, list) else None


def _clean(value: Any) -> str:
    """A string or number as one trimmed line (quotes around it dropped); anything else as ``""``."""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return ""
    return " ".join(str(value).split()).strip("\"' ")


def parse_entities(answer: str) -> list[str] | None:
    """Entity strings in a model's answer (a JSON list; leniently, the quoted strings, else the
    comma-separated items, after the first ``[`` of a truncated or malformed one), de-duplicated
    in order; ``None`` when the answer has no ``[``."""
    items = _first_list(answer)
    if items is None:
        start = answer.find("[")
        if start < 0:
            return None
        rest = answer[start + 1:].split("]", 1)[0]
        items = _QUOTED.findall(rest) or rest.split(",")
    return list(dict.fromkeys(e for e in map(_clean, items) if e))


def parse_triples(answer: str) -> list[Triple] | None:
    """``(subject, relation, object)`` triples in a model's answer (a JSON list of 3-lists;
    leniently, every complete quoted 3-list, else every bracketed 3-item list, of a truncated or
    malformed one), de-duplicated in order; ``None`` when the answer has no ``[``."""
    items = _first_list(answer)
    if items is None:
        start = answer.find("[")
        if start < 0:
            return None
        items = _QUOTED_TRIPLE.findall(answer[start:]) or [inner.split(",") for inner in _INNER_LIST.findall(answer[start:])]
    triples = (tuple(map(_clean, t)) for t in items if isinstance(t, (list, tuple)) and len(t) == 3)
    return list(dict.fromkeys(t for t in triples if all(t)))


def grounded_in(text: str, entities: list[str], triples: list[Triple]) -> tuple[list[str], list[Triple]]:
    """The ``entities`` that ``text`` contains as whole words, compared in normalised form
    (:func:`~isorag_pyg.graph.text.normalize_entity`), and the ``triples`` whose subject
    and object are among them; order kept."""
    words = f" {normalize_entity(text)} "
    kept = [e for e in entities if (key := normalize_entity(e)) and f" {key} " in words]
    named = set(kept)
    return kept, [t for t in triples if t[0] in named and t[2] in named]


class OpenIEExtractor:
    """Named entities, then triples, of each passage from an LLM behind an OpenAI-compatible
    server (vLLM, llama.cpp, Ollama, hosted APIs).

    ``chat=False`` sends few-shot completion prompts whose answer is one JSON line (a base model
    such as the packaged Gemma 3 270M); ``chat=True`` sends the same text as a chat message to an
    instruction-tuned model. The API key is read from ``api_key_env``. Answers are appended to
    ``cache_dir/openie.jsonl`` (default ``$ISORAG_CACHE_DIR/openie``) as they arrive.

    A passage's entities are its named entities plus its triples' subjects and objects. With
    ``grounded`` (the default) only those its text contains as whole words are kept (compared in
    normalised form: case, punctuation, a leading "the" and simple plurals aside; "AbdulJabbar"
    does not match "Abdul-Jabbar"), and only triples whose subject and object are
    kept: a small model copies its few-shot examples' names into its answers, and each such name
    would join unrelated passages; :attr:`ungrounded` counts what was dropped. Empty passages are
    not sent. When more than ``max_bad_share`` of the sent passages get an answer
    with no list in it, :meth:`extract` raises :class:`OpenIEError` (the answers stay cached);
    an unreachable or failing endpoint raises it too, after ``max_retries`` retries."""

    name = "openie"

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", cache_dir: str | Path | None = None,
                 concurrency: int = 8, max_retries: int = 5, timeout: float = 120.0, max_bad_share: float = 0.2,
                 chat: bool = False, max_tokens: int = 256, backoff: float = 1.0, grounded: bool = True):
        if not 0.0 <= max_bad_share <= 1.0:
            raise ValueError(f"max_bad_share must be within [0, 1], got {max_bad_share}")
        self.cache_path = Path(cache_dir or default_cache_dir() / "openie") / "openie.jsonl"
        self.chat, self.max_bad_share, self.grounded = chat, max_bad_share, grounded
        #: entities and triples of the last :meth:`extract` dropped as not in their passage (with ``grounded``)
        self.ungrounded: dict[str, int] = {"entities": 0, "triples": 0}
        #: per step (``entities``, ``triples``), the passages of the last :meth:`extract` whose answer had no list
        self.unparseable: dict[str, int] = {}
        self.generator = OpenAIChatGenerator(base_url, model, api_key_env=api_key_env, concurrency=concurrency,
                                             max_retries=max_retries, timeout=timeout, backoff=backoff, max_tokens=max_tokens,
                                             cache_path=self.cache_path, stop=None if chat else ["\n"])

    @property
    def calls(self) -> int:
        """Requests sent to the endpoint so far (cache hits are not requests)."""
        return self.generator.calls

    def _answers(self, prompts: list[str], desc: str) -> list[str]:
        requests = [[{"role": "user", "content": p}] for p in prompts] if self.chat else prompts
        try:
            return [r["answer"] for r in self.generator.generate(requests, desc=desc)]
        except GeneratorError as err:
            raise OpenIEError(f"OpenIE stopped ({desc}): {str(err).rstrip('.')}. The answers received so far are cached in {self.cache_path}; "
                              "rerun to resume") from err

    def _check(self, bad: list[int], texts: list[str], answers: list[str], desc: str) -> None:
        self.unparseable[desc] = len(bad)
        if not texts:
            return
        share = len(bad) / len(texts)
        if share > self.max_bad_share:
            examples = "; ".join(repr(answers[i][:80]) for i in bad[:3])
            raise OpenIEError(f"{desc}: {len(bad)} of {len(texts)} passages ({share:.0%}) got answers with no JSON list from "
                              f"{self.generator.model} at {self.generator.base_url}, above max_bad_share={self.max_bad_share:.0%} "
                              f"(e.g. {examples}). Use a stronger model or raise max_bad_share; the answers are cached in {self.cache_path}")
        if bad:
            log.warning("%s: %d of %d passages got unparseable answers; they have no %s", desc, len(bad), len(texts), desc)

    def extract(self, texts: Sequence[str]) -> Extraction:
        """One entity list and one triple list per text, in order (identical texts asked once)."""
        unique = list(dict.fromkeys(t for t in texts if t.strip()))
        if len(unique) < len(texts):
            log.info("OpenIE: %d of %d passages are empty or repeated", len(texts) - len(unique), len(texts))
        ner_answers = self._answers([ner_prompt(t) for t in unique], "entities")
        entities = [parse_entities(a) for a in ner_answers]
        self._check([i for i, e in enumerate(entities) if e is None], unique, ner_answers, "entities")
        asked = [i for i, e in enumerate(entities) if e]
        triple_answers = self._answers([triple_prompt(unique[i], entities[i]) for i in asked], "triples")
        parsed = [parse_triples(a) for a in triple_answers]
        self._check([j for j, t in enumerate(parsed) if t is None], [unique[i] for i in asked], triple_answers, "triples")
        triples: dict[str, list[Triple]] = {unique[i]: t or [] for i, t in zip(asked, parsed)}
        found = {t: list(dict.fromkeys([*(e or []), *(x for s, _, o in triples.get(t, []) for x in (s, o))]))
                 for t, e in zip(unique, entities)}
        self.ungrounded = {"entities": 0, "triples": 0}
        if self.grounded:
            for text in unique:
                kept, kept_triples = grounded_in(text, found[text], triples.get(text, []))
                self.ungrounded["entities"] += len(found[text]) - len(kept)
                self.ungrounded["triples"] += len(triples.get(text, [])) - len(kept_triples)
                found[text], triples[text] = kept, kept_triples
            if any(self.ungrounded.values()):
                log.info("OpenIE: %(entities)d entities and %(triples)d triples not in their passage dropped", self.ungrounded)
        return Extraction(entities=[found.get(t, []) for t in texts], triples=[triples.get(t, []) for t in texts],
                          ungrounded=dict(self.ungrounded) if self.grounded else {})
