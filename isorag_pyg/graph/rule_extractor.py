"""An LLM-free entity extractor for any corpus on a CPU: capitalised name spans (the
``entity_comention`` builder's :func:`~isorag_pyg.graph.builders.entity_mentions`), dates, years
and other numbers, and the identifiers Markdown code spans name — regular expressions only,
thousands of passages a second."""
from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from isorag_pyg.graph.builders import names_in_normalized
from isorag_pyg.graph.extraction import Extraction
from isorag_pyg.graph.text import code_identifiers, normalize_unicode

log = logging.getLogger(__name__)

_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
# "3 March 1990", "March 3, 1990", "March 1990": one date entity, kept whole
_DATE = re.compile(rf"\b(?:\d{{1,2}}\s+{_MONTH}\s+\d{{3,4}}|{_MONTH}\s+\d{{1,2}},?\s+\d{{3,4}}|{_MONTH}\s+\d{{3,4}})\b")
# years and other numbers of at least two digits ("2007", "1,200"), whole or not at all ("3.5" is
# skipped: too generic; nor "1990.5" or "1,2000" in part)
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,.]?\d)|(?<![\w.,])\d{2,}(?![\w,.]?\d)")


class RuleExtractor:
    """Entities of each passage by rules, from its normalised text: capitalised spans (split
    at name particles, leading function words and a closing possessive dropped, the owner of an
    inner possessive kept too, at least ``min_chars`` characters), dates and whole numbers of two
    digits or more (``numbers``), and, with ``code_spans`` (default: off; the automatic graph
    turns it on for documentation), the identifiers of code spans
    (:func:`~isorag_pyg.graph.text.code_identifiers`), kept with their backticks ("`alpha`"). Extracts
    no triples."""

    name = "rules"

    def __init__(self, min_chars: int = 4, numbers: bool = True, code_spans: bool = False):
        if min_chars < 1:
            raise ValueError(f"min_chars must be >= 1, got {min_chars}")
        self.min_chars, self.numbers, self.code_spans = min_chars, numbers, code_spans

    def extract_one(self, text: str) -> list[str]:
        """The entity strings of one text, sorted (casefolded names, dates, numbers; the text
        normalised first, as :func:`~isorag_pyg.graph.builders.entity_mentions` does)."""
        text = normalize_unicode(text)
        found = names_in_normalized(text, self.min_chars)
        if self.numbers:
            found.update(m.group().casefold() for m in _DATE.finditer(text))
            found.update(m.group() for m in _NUMBER.finditer(text))
        if self.code_spans:
            found.update(f"`{identifier}`" for identifier in code_identifiers(text))
        return sorted(found)

    def extract(self, texts: Sequence[str]) -> Extraction:
        entities = [self.extract_one(text) for text in texts]
        if empty := sum(1 for e in entities if not e):
            log.info("rule extractor: %d of %d passages mention no entity (they get no entity edge)", empty, len(texts))
        return Extraction(entities, [[] for _ in texts])
