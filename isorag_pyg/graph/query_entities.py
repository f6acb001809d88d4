"""Query-matched entity seeds (HippoRAG's way into an entity graph): the entities a question
mentions, found by the LLM-free rule extractor and normalised as the entity graph's own strings,
matched to the graph's entity nodes."""
from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from isorag_pyg.graph.rule_extractor import RuleExtractor
from isorag_pyg.graph.text import entity_key, fold_latin_accents, normalize_unicode, title_variants

# words that open a question capitalised but name nothing ("Did Dara Quen ..." -> "Dara Quen");
# not "Will" or "Can", which also open names
_QUESTION_WORDS = frozenset(
    ["are", "could", "did", "do", "does", "has", "have", "how", "is", "was", "were", "what", "when", "where", "which", "who",
     "whom", "whose", "why", "would"]
)


_FIRST_WORD = re.compile(r"\W*(\w+)")
_WORD = re.compile(r"\w+")
# a question's word as an identifier may be written: "alpha", "max-k", "--max-k", "WANDB_MODE", "scoring.py"
_IDENTIFIER = re.compile(r"-*\w(?:[\w./-]*\w)?")
#: A name the question writes that no entity node has is read as the entity nodes whose names
#: contain it as whole words, when there are at most this many ("LaHave" -> "LaHave River").
MAX_CONTAINING = 3
#: ... and as the entities whose alphabetic keys are this close to it (difflib's ratio; a
#: misspelling: "Margaraviate" -> "Margraviate"), for keys of at least ``FUZZY_MIN_LENGTH`` letters.
FUZZY_RATIO = 0.85
FUZZY_MIN_LENGTH = 6


def plain_identifier(word: str) -> str:
    """An identifier as compared with a question's words: case-folded, leading dashes dropped."""
    return normalize_unicode(word).casefold().lstrip("-")


def _question_word_lowered(question: str) -> str:
    """``question`` with its opening question word lowercased (after any opening quote or
    bracket), so that it does not start a name."""
    first = _FIRST_WORD.match(question)
    if first is None or first[1].casefold() not in _QUESTION_WORDS:
        return question
    return question[: first.start(1)] + first[1].casefold() + question[first.end(1) :]


def query_extractor(graph_spec: Mapping[str, Any]) -> RuleExtractor:
    """The extractor a question goes through: the rules extractor with the entity graph's own
    rule arguments (``graph_spec["entity_graph"]``), or with its defaults when the graph's
    entities came from another extractor (OpenIE: questions are matched by rules, after the same
    normalisation)."""
    builder = graph_spec.get("entity_graph") or {}
    rules = builder.get("extractor", "rules") == "rules"
    return RuleExtractor(**dict(builder.get("extractor_args") or {})) if rules else RuleExtractor()


def names_in_question(question: str, extractor: RuleExtractor) -> list[str]:
    """The entity strings ``extractor`` finds in ``question`` (its opening question word lowercased
    first, so that it does not start a name): what a question is matched to entity nodes by."""
    return extractor.extract_one(_question_word_lowered(question))


class QueryEntityMatcher:
    """Finds an entity graph's entity nodes in questions, and the passages that alone mention an
    entity a question names.

    A name the question writes that no entity node has is first read as the entity nodes whose
    names contain it as whole words (at most :data:`MAX_CONTAINING`: "LaHave" is "LaHave River")
    and the entities whose keys nearly equal it (:data:`FUZZY_RATIO`, letters only: a
    misspelling; entity nodes, or another passage's unique mention); where such a reading exists
    it replaces the passage that alone writes the name the question's way (a passage that copies
    a question's spelling is no longer its only seed).

    Args:
        names: the entity nodes' display names (node ``num_passages + i`` is ``names[i]``).
        num_passages: the passages before the entity nodes.
        extractor: the rule extractor run on each question (default: the entity graph's default one).
        unique_mentions: entity key (:func:`~isorag_pyg.graph.text.entity_key`) -> the row
            of the one passage that mentions it (default: none).
        title_of: passage row -> its title, read by :meth:`titled_rows` for the unique mentions a
            question names (default: none, no passage is titled).
    """

    def __init__(self, names: Sequence[str], num_passages: int, extractor: RuleExtractor | None = None,
                 unique_mentions: Mapping[str, int] | None = None, title_of: Callable[[int], str] | None = None):
        self.extractor = extractor or RuleExtractor()
        self.num_passages = num_passages
        # every row under a key: an index built before keys dropped accents may hold two nodes
        # ("tekeze river", "tekezé river") that a rebuild would merge, and a question names both
        self.rows: dict[str, list[int]] = {}
        self.names: dict[str, str] = {}  # a node key -> its name, case-folded
        for i, name in enumerate(names):
            if key := entity_key(name):
                self.rows.setdefault(key, []).append(num_passages + i)
                self.names[key] = name.casefold()
        self._by_word: dict[str, set[str]] = {}  # a word -> the prose node keys whose names have it
        # the identifiers of code nodes as a question may write them, as plain words ("`--max-k`": "max-k")
        self.code_words: dict[str, list[str]] = {}
        for key, name in self.names.items():
            if key.startswith("`"):
                self.code_words.setdefault(plain_identifier(name.strip("`")), []).append(name)
                continue
            for word in _WORD.findall(name):
                self._by_word.setdefault(word, set()).add(key)
        self.title_of = title_of
        for key, row in (unique_mentions or {}).items():  # folded: such an index also kept accents in these keys
            self.rows.setdefault(fold_latin_accents(key), []).append(row)
        self._by_shape: dict[tuple[int, str], list[str]] = {}  # (length, first letter) -> alphabetic keys
        for key in self.rows:
            if key.isalpha():
                self._by_shape.setdefault((len(key), key[0]), []).append(key)

    def __call__(self, questions: Sequence[str]) -> list[list[int]]:
        """The rows each question names (sorted, no repeats; empty when none): entity nodes, and
        passages for entities that only that passage mentions."""
        return [sorted({row for name in self.names_in(q) for row in self.rows_named(name)}) for q in questions]

    def names_in(self, question: str) -> list[str]:
        """The names ``question`` writes: those its rules extractor finds, and the code nodes
        whose identifiers it writes as words, spelled as written but for case and leading dashes
        ("alpha" or "Alpha" for a node "`alpha`", "max-k" for "`--max-k`"; not "server" for
        "`servers`", nor a question word or a single letter)."""
        names = names_in_question(question, self.extractor)
        if self.code_words:
            words = {plain_identifier(word) for word in _IDENTIFIER.findall(question)}
            names += [name for word in words - _QUESTION_WORDS if len(word) > 1 for name in self.code_words.get(word, ())]
        return names

    def titled_rows(self, questions: Sequence[str]) -> list[set[int]]:
        """The unique-mention passages each question names by their title ("Wolfgang Smith" or
        "Get Low" for the passages titled "Wolfgang Smith" and "Get Low (song)"): the article the
        name is about, not a passage that merely writes it (none without ``title_of``)."""
        found: list[set[int]] = []
        for question in questions:
            keys = {entity_key(name) for name in self.names_in(question)} if self.title_of else set()
            found.append({row for key in keys for row in self.rows.get(key, ()) if row < self.num_passages
                          and key in {entity_key(variant) for variant in title_variants(self.title_of(row))}})
        return found

    def rows_named(self, name: str) -> list[int]:
        """The rows a name in a question stands for: its entity nodes; where it has none, the
        nodes it reads as otherwise (:meth:`readings`), else the passage that alone mentions it."""
        key = entity_key(name)
        rows = self.rows.get(key, [])
        if any(row >= self.num_passages for row in rows):
            return rows
        return [row for other in readings for row in self.rows[other]] if (readings := self.readings(name, key)) else rows

    def readings(self, name: str, key: str) -> list[str]:
        """The keys a name without an entity node reads as: the nodes whose names contain it as
        whole words (at most :data:`MAX_CONTAINING`) and the entities, nodes or unique mentions,
        whose keys nearly equal it."""
        words, found = _WORD.findall(name.casefold()), []
        if words:
            phrase = re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)")
            shared = set.intersection(*(self._by_word.get(word, set()) for word in words))
            containing = sorted(k for k in shared if k != key and phrase.search(self.names[k]))
            found += containing if len(containing) <= MAX_CONTAINING else []
        if len(key) >= FUZZY_MIN_LENGTH and key.isalpha():
            shapes = [k for size in (len(key) - 1, len(key), len(key) + 1) for k in self._by_shape.get((size, key[0]), ()) if k != key]
            found += [k for k in difflib.get_close_matches(key, shapes, n=2, cutoff=FUZZY_RATIO) if k not in found]
        return found
