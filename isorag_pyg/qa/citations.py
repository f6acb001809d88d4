"""Citations in an answer: the ``[n]`` markers naming the prompt's numbered passages, checked
against the passages, or, for an answer without markers (a small reader often writes none), the
best-ranked passage that contains the answer (or all of its words, or what it adds to the
question), marked as matched rather than cited."""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import regex

#: What the prompt tells the reader to answer when the passages do not hold the answer.
NOT_FOUND = "the documents do not contain the answer"

#: Words an answer and a passage are matched without.
ARTICLES = frozenset({"a", "an", "the"})
#: A word: runs of letters, digits and marks, joined by what may join them inside a word.
WORD = regex.compile(r"[\p{L}\p{N}\p{M}]+(?:[-_',.\u2019][\p{L}\p{N}\p{M}]+)*")
#: The joiners a word drops: all but a point between digits.
JOINERS = regex.compile(r"[-_',\u2019]|(?<!\d)\.|\.(?!\d)")

#: Answers a passage cannot attribute: a "yes" in some passage is no evidence for a "yes" answer.
YES_NO = frozenset({"yes", "no"})
#: A citation marker: ``[3]``, or several numbers in one pair of brackets (``[1, 2]``).
MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]", re.ASCII)


def cited_numbers(answer: str, passages: int) -> list[int]:
    """The passage numbers ``answer`` cites, in the order first cited, each once; numbers
    outside ``1..passages`` (no such passage in the prompt) are left out.

    Example:
        >>> cited_numbers("Paris [2][1], not Lyon [2] [9]", passages=5)
        [2, 1]
    """
    numbers = (int(n) for found in MARKER.findall(answer) for n in found.split(","))
    return list(dict.fromkeys(n for n in numbers if 1 <= n <= passages))


def without_markers(answer: str) -> str:
    """``answer`` without its citation markers, the text EM and F1 are scored on.

    Example:
        >>> without_markers("Stephen King [2]")
        'Stephen King'
    """
    return re.sub(r"\s+", " ", MARKER.sub("", answer)).strip()


def citation_words(text: str) -> list[str]:
    """``text``'s words for matching an answer to a passage: NFKC-normalised (composed and
    decomposed accents read alike) and case-folded; a word is a run of letters, digits and marks,
    with what joins such runs inside it dropped (``-``, ``_``, ``'``, ``,``, and ``.`` but
    between digits), so ``e-mail``, ``E_MAIL`` and ``email`` are one word,
    ``1,000`` is ``1000`` (not the ``000`` of ``5,000``) and ``3.14`` keeps its point; anything
    else separates words (``ISORAG_API_KEY=KEY`` is two); articles left out.

    Example:
        >>> citation_words("The ISORAG_API_KEY=KEY, 1,000 e-mails in the U.S., pi 3.14")
        ['isoragapikey', 'key', '1000', 'emails', 'in', 'us', 'pi', '3.14']
    """
    words = (JOINERS.sub("", word) for word in WORD.findall(unicodedata.normalize("NFKC", text).casefold()))
    return [w for w in words if w not in ARTICLES]


def matched_number(answer: str, texts: Sequence[str], question: str = "") -> int | None:
    """The number (1-based) of the first of ``texts`` whose words (:func:`citation_words`)
    contain the answer's as a phrase, else of the first that contains all of them in any order
    (a reader that reorders or joins what it read: "1,000 idle sockets" from "1,100 idle +
    1,000 slow-loris sockets"), else, for an answer that restates ``question`` ("The default
    port is 8000"), of the one that contains what the answer adds to the question as a phrase
    and shares the most of the answer's other words (at least one; the first of equals);
    ``None``: none does, or the answer is empty or says the documents do not hold it.

    Example:
        >>> matched_number("Paris.", ["Lyon is a city.", "The capital is Paris, France."])
        2
        >>> matched_number("France, capital", ["Lyon is in France.", "Paris is the capital of France."])
        2
        >>> matched_number("The default port is 8000.", ["timeout 8000 ms", "| --port | 8000 | default |"], "What is the default port?")
        2
    """
    return _matched(answer, PassageWords.of(texts), question)


@dataclass(frozen=True)
class PassageWords:
    """Passages' :func:`citation_words`, split once: joined between spaces, and as sets."""

    padded: list[str]
    word_sets: list[set[str]]

    @classmethod
    def of(cls, texts: Sequence[str]) -> PassageWords:
        words = [citation_words(text) for text in texts]
        return cls([f" {' '.join(w)} " for w in words], [set(w) for w in words])

    def subset(self, numbers: Sequence[int]) -> PassageWords:
        """The passages numbered ``numbers`` (1-based), in that order."""
        return PassageWords([self.padded[n - 1] for n in numbers], [self.word_sets[n - 1] for n in numbers])


def _matched(answer: str, passages: PassageWords, question: str) -> int | None:
    """:func:`matched_number` over passages already split."""
    wanted = citation_words(without_markers(answer))
    if not wanted or wanted == citation_words(NOT_FOUND):
        return None
    padded, word_sets = passages.padded, passages.word_sets
    found = next((n for n, text in enumerate(padded, 1) if f" {' '.join(wanted)} " in text), None)
    if found is None:
        found = next((n for n, seen in enumerate(word_sets, 1) if set(wanted) <= seen), None)
    if found is not None or not question:
        return found
    asked = set(citation_words(question))
    added, repeated = [w for w in wanted if w not in asked], {w for w in wanted if w in asked}
    if not added or not repeated:
        return None
    phrase = f" {' '.join(added)} "
    best = max(((len(repeated & seen), -n) for n, (text, seen) in enumerate(zip(padded, word_sets), 1) if phrase in text), default=(0, 0))
    return -best[1] if best[0] else None


def claims(answer: str, passages: int) -> list[tuple[str, list[int]]]:
    """Each group of ``answer``'s markers (markers with no word between them) with its claim: the
    text since the previous group (for a group that opens the answer: the text after it); the
    numbers as :func:`cited_numbers` reads them, groups naming no passage left out.

    Example:
        >>> claims("Paris [1][3] and Lyon [2], says [9]", passages=3)
        [('Paris', [1, 3]), ('and Lyon', [2])]
    """
    pieces = MARKER.split(answer)  # text, numbers, text, numbers, ..., text
    texts, found = pieces[0::2], pieces[1::2]
    groups: list[tuple[str, list[str], int]] = []  # text before, numbers, index of the text after
    for i, numbers in enumerate(found):
        if groups and not citation_words(texts[i]):
            before, joined, _ = groups[-1]
            groups[-1] = (before, [*joined, numbers], i + 1)
        else:
            groups.append((texts[i], [numbers], i + 1))
    out = []
    for before, numbers, after in groups:
        claim = before if citation_words(before) else texts[after]
        if valid := cited_numbers("".join(f"[{n}]" for n in numbers), passages):
            out.append((claim.strip(), valid))
    return out


def citations(answer: str, texts: Sequence[str], question: str = "") -> list[tuple[int, str]]:
    """The passage numbers (1-based) ``answer`` cites among ``texts``, each once in the order
    first cited, and how: ``"marker"``, a group of its ``[n]`` markers (:func:`claims`), unless
    none of their passages holds the group's claim while another one does, as
    :func:`matched_number` reads it (a small reader copies its examples' markers); ``"match"``:
    that passage instead, and, for an answer with no marker naming a passage, the passage that
    holds the whole answer. A yes/no claim keeps its markers (no passage can hold it).

    Example:
        >>> citations("120 seconds [2] and more", ["timeout: 120 seconds", "port: 8000"])
        [(1, 'match')]
        >>> citations("8000 [2]; 120 seconds [1]", ["timeout: 120 seconds", "port: 8000"])
        [(2, 'marker'), (1, 'marker')]
        >>> citations("yes [1]", ["Is it? yes", "no"])
        [(1, 'marker')]
    """
    groups, passages = claims(answer, len(texts)), PassageWords.of(texts)
    if not groups:
        found = _matched(answer, passages, question)
        return [] if found is None else [(found, "match")]
    cited: dict[int, str] = {}
    for claim, numbers in groups:
        by = "marker"
        if not set(citation_words(claim)) <= YES_NO and (found := _matched(claim, passages, question)) is not None \
                and _matched(claim, passages.subset(numbers), question) is None:
            numbers, by = [found], "match"
        for n in numbers:
            cited.setdefault(n, by)
    return list(cited.items())
