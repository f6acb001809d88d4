"""The one Unicode normalisation of passage text and entity strings, shared by every extractor
and by the entity keys, so that a name reads alike wherever it was written."""
from __future__ import annotations

import unicodedata

import regex

# superscripts (footnote marks, exponents, ordinal indicators, "™"): NFKC alone would glue them
# to the word before them as plain characters ("1990²" -> "19902", "Windows™" -> "WindowsTM")
_SUPERSCRIPT = regex.compile(r"\p{Decomposition_Type=Super}")


def normalize_unicode(text: str) -> str:
    """``text`` NFKC-normalised (composed and decomposed accents, full-width letters and digits
    and ligatures read alike; subscripts become digits, "CO₂" -> "CO2"), superscript characters
    read as spaces first ("1990²" stays the year 1990, "Windows™" the name Windows).

    >>> normalize_unicode("Windows™ 1990² ﬁve Ｆｕｌｌ")
    'Windows  1990  five Full'
    """
    return unicodedata.normalize("NFKC", _SUPERSCRIPT.sub(" ", text))
