"""Citations in an answer: the ``[n]`` markers naming the prompt's numbered passages."""
from __future__ import annotations

import re

#: A citation marker: ``[3]``, or several numbers in one pair of brackets (``[1, 2]``).
MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


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
