"""The one Unicode normalisation of passage text and entity strings, shared by every extractor
and by the entity keys, so that a name reads alike wherever it was written."""
from __future__ import annotations

import unicodedata

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
