"""The one Unicode normalisation of passage text and entity strings, shared by every extractor,
and the entity keys built on it, so that a name reads alike wherever it was written; identifiers
written as Markdown code spans; titles as the rule extractor reads them."""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

import regex

# superscripts other than letters (footnote marks and exponents, "™", "℠"): NFKC alone would glue
# them to the word before them as plain characters ("1990²" -> "19902", "Windows™" -> "WindowsTM");
# superscript letters stay letters ("MᶜLeod" -> "McLeod")
_SUPERSCRIPT = regex.compile(r"(?V1)[\p{Decomposition_Type=Super}--\p{L}]")


def normalize_unicode(text: str) -> str:
    """``text`` NFKC-normalised (composed and decomposed accents, full-width letters and digits
    and ligatures read alike; subscripts become digits, "CO₂" -> "CO2"), superscript digits,
    signs and "™" read as spaces first ("1990²" stays the year 1990, "Windows™" the name Windows).

    >>> normalize_unicode("Windows™ 1990² ﬁve Ｆｕｌｌ MᶜLeod")
    'Windows  1990  five Full McLeod'
    """
    return unicodedata.normalize("NFKC", _SUPERSCRIPT.sub(" ", text))


# not a letter, digit or mark: a Devanagari vowel sign is part of its word
_NON_WORD = regex.compile(r"[^\w\p{M}]+")


def _singular(word: str) -> str:
    """A simple plural's singular ("films" -> "film", "cities" -> "city"); other words unchanged."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and not word.isdigit():
        return word[:-1]
    return word


#: Letters below this code point are Latin: their accents are dropped from entity keys.
_LATIN_END = "\u0250"
#: Latin letters whose mark is part of the letter, not a combining accent ("Đà Nẵng" = "Da Nang").
_STROKED = str.maketrans({"đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "ħ": "h", "Ħ": "H", "æ": "ae", "Æ": "AE",
                          "œ": "oe", "Œ": "OE"})


def fold_latin_accents(text: str) -> str:
    """``text`` with the accents of Latin letters dropped ("Tekezé" -> "Tekeze"), other scripts'
    combining marks kept (a Devanagari vowel sign is part of its word).

    >>> fold_latin_accents("Akinoshū Kenji, Ñandú, Đà Nẵng, Łódź, हिंदी")
    'Akinoshu Kenji, Nandu, Da Nang, Lodz, हिंदी'
    """
    kept: list[str] = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.combining(ch) and kept and kept[-1] < _LATIN_END:
            continue
        kept.append(ch)
    return unicodedata.normalize("NFC", "".join(kept)).translate(_STROKED)


#: A Markdown code span that names one identifier ("`alpha`", "`--max-k`", "`WANDB_MODE`"): single
#: backticks around 2-60 characters without spaces (TeX-style ``quotes'' are not one).
CODE_SPAN = re.compile(r"(?<![`\w])`([^`\s]{2,60})`(?![`\w])")


def code_identifiers(text: str) -> Iterator[str]:
    """The identifiers ``text`` writes as Markdown code spans (:data:`CODE_SPAN`), in order, each
    with a letter (a span of digits and signs alone names no identifier)."""
    return (m[1] for m in CODE_SPAN.finditer(text) if any(c.isalpha() for c in m[1]))


def has_code_span(text: str) -> bool:
    """``text`` writes an identifier as a Markdown code span (:func:`code_identifiers`)."""
    return next(code_identifiers(text), None) is not None


def title_cased(title: str, code_spans: bool = False) -> str:
    """``title`` (normalised as passage text is) with the first letter of every word capitalised,
    the rest as written, so that the rule extractor reads the name whole, as it reads a question
    that capitalises it ("Storm over Wyoming" is one name, not "Storm" and "Wyoming"), and a
    disambiguator as the question writes it ("Lola (1981 Film)": the article names "film" too,
    as every article titled "(film)" then does, a hub the question's entity seed splits by
    cosine). Georgian letters stay as they are: the script is read without capitals; and so,
    with ``code_spans`` (the extractor reads them), do the identifiers of code spans
    (:data:`CODE_SPAN`): an identifier is written one way.

        >>> title_cased("Storm over Wyoming (film)")
        'Storm Over Wyoming (Film)'
        >>> title_cased("rock 'n' roll, jean-luc, ﬁlm")
        "Rock 'n' Roll, Jean-Luc, Film"
        >>> title_cased("the `blank_titles.py` script", code_spans=True), title_cased("the `blank_titles.py` script")
        ('The `blank_titles.py` Script', 'The `Blank_titles.Py` Script')
    """
    text, cased, start = normalize_unicode(title), [], 0
    for span in [*(CODE_SPAN.finditer(text) if code_spans else ()), None]:
        end = span.start() if span else len(text)
        cased.append(_WORD_START.sub(lambda m: m[1] if "\u10a0" <= m[1] <= "\u10ff" else m[1].upper(), text[start:end]))
        if span:
            cased.append(span.group())
            start = span.end()
    return "".join(cased)


#: The first letter of a word (after a space, punctuation other than an apostrophe, or the start).
_WORD_START = regex.compile(r"(?<![\w\p{M}'’])(\w)")




def normalize_entity(name: str) -> str:
    """The key under which entity strings merge: normalised (:func:`~isorag_pyg.graph.text.normalize_unicode`), casefolded, Latin
    accents dropped (a question may spell "Tekeze River" where the passage spells "Tekezé"),
    punctuation dropped, a leading "the" dropped, simple plurals made singular ("The Beatles'"
    and "beatles" -> "beatle"); empty when nothing is left. An identifier written as code keeps
    a leading backtick, so that it never merges with a name in prose ("`alpha`" -> "`alpha",
    "Alpha" -> "alpha").

    >>> normalize_entity("`vouch_share`"), normalize_entity("The Beatles'")
    ('`vouch share', 'beatle')
    """
    if CODE_SPAN.fullmatch(stripped := name.strip()):
        return f"`{inner}" if (inner := normalize_entity(stripped[1:-1])) else ""
    words = _NON_WORD.sub(" ", fold_latin_accents(normalize_unicode(name).casefold())).replace("_", " ").split()
    if len(words) > 1 and words[0] == "the":
        words = words[1:]
    return " ".join(_singular(w) for w in words)


def near_duplicate_key(key: str) -> str:
    """Keys that differ only in spacing and hyphenation ("new york" / "newyork") merge: a
    blocking key, so merging stays linear in the number of entities."""
    return key.replace(" ", "")


def entity_key(name: str) -> str:
    """The key under which an entity string meets its entity node: equal for every surface form
    merged into one node (its display name included); empty when nothing is left."""
    return near_duplicate_key(normalize_entity(name))


_PARENTHETICAL = re.compile(r"\s*\([^)]*\)\s*$")


def title_variants(title: str) -> set[str]:
    """A title as names read it: whole, and without a closing parenthetical disambiguator.

    Example:
        >>> sorted(title_variants("Get Low (song)"))
        ['Get Low', 'Get Low (song)']
    """
    return {title, _PARENTHETICAL.sub("", title)}
