"""A document split into passages under a token budget, along its Markdown structure: a heading
starts a new passage, and every passage begins with the headings of the section it lies in; a
table too long for one passage gives a passage per row, each under the table's header row (a
row is a record: its header says what its cells are); a fenced code block is split between
lines; any other paragraph is kept whole, else split at sentence ends, else at words. Plain text
is packed paragraph by paragraph."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from isorag_pyg.datasets.corpus_report import MAX_PASSAGE_CHARS
from isorag_pyg.datasets.formats import normalize_text

TokenCounter = Callable[[str], int]
# the start of an ATX Markdown heading line ("## Install"): up to 3 spaces, 1-6 #s, a space or the end
_HEADING_START = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_DELIMITER_CELL = re.compile(r":?-+:?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def count_words(text: str) -> int:
    """Whitespace-separated words: the budget's unit when no tokenizer is given."""
    return len(text.split())


def heading(line: str) -> tuple[int, str] | None:
    """An ATX heading line's level and text, a closing run of #s after a space left out; ``None``
    for any other line (or a heading without text).

    Example:
        >>> heading("## Install ##"), heading("### C# tips"), heading("#hashtag")
        ((2, 'Install'), (3, 'C# tips'), None)
    """
    match = _HEADING_START.match(line)
    if not match:
        return None
    text = line[match.end() :].strip()
    unclosed = text.rstrip("#")
    if unclosed != text and (not unclosed or unclosed[-1] in " \t"):
        text = unclosed.rstrip()
    return (len(match.group(1)), text) if text else None


def split_title(text: str, fallback: str) -> tuple[str, str]:
    """The first Markdown heading as the title (and the text without it), else ``fallback``.

    Example:
        >>> split_title("# Paris\\n\\nThe capital.", "paris")
        ('Paris', '\\nThe capital.')
    """
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        found = heading(line)
        if found:
            return found[1], "\n".join(lines[:i] + lines[i + 1 :])
        break
    return fallback, text


def _delimiter_row(line: str) -> bool:
    """Whether ``line`` is a table's delimiter row: ``|---|:--:|``, ``--- | ---``."""
    return "|" in line and all(_DELIMITER_CELL.fullmatch(cell.strip()) for cell in line.strip().strip("|").split("|"))


@dataclass(frozen=True)
class _Limits:
    tokens: int
    chars: int
    count: TokenCounter

    def fits(self, text: str, size: int) -> bool:
        return size <= self.tokens and len(text) <= self.chars


def split_passages(text: str, max_tokens: int, count_tokens: TokenCounter = count_words,
                   max_chars: int = MAX_PASSAGE_CHARS, markdown: bool = True) -> list[str]:
    """``text`` as passages of at most ``max_tokens`` tokens and ``max_chars`` characters, whitespace
    collapsed, in order, nothing left out. The blocks of one section are packed together, except a
    table too long for one passage, whose rows are passages of their own under its header. A
    passage begins with its section's heading lines, the innermost ones that fit half the budget;
    a heading that is in no such prefix is a passage of its own, where it stands. Pieces are
    counted once and their counts added (exact for word-piece tokenizers such as the default
    encoder's, which tokenize each whitespace-separated word on its own). ``markdown=False``:
    paragraphs only, no headings, tables or code (a ``.txt`` file).

    Example:
        >>> split_passages("a b c\\n\\nd e\\n\\nf g h i", max_tokens=5)
        ['a b c d e', 'f g h i']
        >>> split_passages("## Knobs\\n\\n| knob | default |\\n|---|---|\\n| k | 5 |\\n| tau | 10 |", max_tokens=16)
        ['## Knobs | knob | default | |---|---| | k | 5 |', '## Knobs | knob | default | |---|---| | tau | 10 |']
    """
    full = _Limits(max_tokens, max_chars, count_tokens)
    passages: list[str] = []
    shown: set[int] = set()  # the heading lines some passage holds
    for headings, blocks in _sections(text.splitlines(), markdown):
        kept = _prefix_headings(headings, full) if blocks else []
        alone = [("text", [line]) for number, line in headings if number not in shown and (number, line) not in kept]
        shown.update(number for number, _ in headings)
        passages.extend(body for body, _ in _pack(alone, full))
        prefix = normalize_text(" ".join(line for _, line in kept))
        limits = _Limits(max_tokens - count_tokens(prefix), max_chars - len(prefix) - 1, count_tokens) if prefix else full
        passages.extend(f"{prefix} {body}" if prefix else body for body, _ in _pack(blocks, limits))
    return passages


def _pack(blocks: list[tuple[str, list[str]]], limits: _Limits) -> list[tuple[str, int]]:
    """Blocks' pieces packed into passages of at most ``limits``, a long table's rows alone."""
    packed: list[tuple[str, int]] = []
    sealed = 0  # the passages before this one take no more pieces
    for block in blocks:
        pieces, alone = _block_pieces(block, limits)
        if alone:
            packed.extend(pieces)
            sealed = len(packed)
        else:
            for piece, size in pieces:
                _add(packed, piece, size, limits, sealed)
    return packed


def _add(packed: list[tuple[str, int]], piece: str, size: int, limits: _Limits, sealed: int = 0) -> None:
    """``piece`` joined to the last of ``packed`` where it fits there (and that one is not among
    the first ``sealed``), else a new passage."""
    joined = f"{packed[-1][0]} {piece}" if len(packed) > sealed else ""
    if joined and limits.fits(joined, packed[-1][1] + size):
        packed[-1] = (joined, packed[-1][1] + size)
    else:
        packed.append((piece, size))


def _sections(lines: list[str], markdown: bool) -> Iterator[tuple[list[tuple[int, str]], list[tuple[str, list[str]]]]]:
    """Per section, in order: its headings (outermost first, as (line number, line)) and its blocks
    as (kind, lines), kind ``"text"``, ``"table"`` or ``"code"``. A section without blocks is left
    out when its headings begin a subsection's, else given without blocks. Without ``markdown``
    one section of paragraphs."""
    headings: list[tuple[int, int, str]] = []  # (line number, level, line)
    yielded: set[int] = set()
    blocks: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        found = heading(line) if markdown else None
        if not line.strip():
            i += 1
        elif found:
            level = found[0]
            if blocks or any(number not in yielded for number, lvl, _ in headings if lvl >= level):
                yield [(number, line) for number, _, line in headings], blocks
                yielded.update(number for number, _, _ in headings)
                blocks = []
            headings = [h for h in headings if h[1] < level] + [(i, level, line)]
            i += 1
        elif markdown and (fence := _FENCE.match(line)):
            mark = fence.group(1)[0] * len(fence.group(1))
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(mark)), len(lines) - 1)
            blocks.append(("code", lines[i : end + 1]))
            i = end + 1
        else:
            end = i
            while end + 1 < len(lines) and lines[end + 1].strip() and not (markdown and (heading(lines[end + 1]) or _FENCE.match(lines[end + 1]))):
                end += 1
            paragraph = lines[i : end + 1]
            is_table = markdown and len(paragraph) > 2 and "|" in paragraph[0] and _delimiter_row(paragraph[1])
            blocks.append(("table" if is_table else "text", paragraph))
            i = end + 1
    if blocks or headings:
        yield [(number, line) for number, _, line in headings], blocks


def _prefix_headings(headings: list[tuple[int, str]], limits: _Limits) -> list[tuple[int, str]]:
    """The heading lines a section's passages begin with: the innermost ones that together fit half
    the budget (a passage keeps the other half for its text)."""
    kept: list[tuple[int, str]] = []
    for heading in reversed(headings):
        candidate = normalize_text(" ".join(line for _, line in [heading, *kept]))
        if 2 * limits.count(candidate) > limits.tokens or 2 * len(candidate) > limits.chars:
            break
        kept.insert(0, heading)
    return kept


def _block_pieces(block: tuple[str, list[str]], limits: _Limits) -> tuple[list[tuple[str, int]], bool]:
    """A block as (text, tokens) pieces within ``limits``, and whether each is a passage alone:
    whole if it fits; a table as its rows under its header (alone), or, when the header takes
    more than half the budget, as runs of rows; code as runs of lines; any other paragraph as
    sentences, else words."""
    kind, lines = block
    whole = normalize_text(" ".join(lines))
    if kind == "text" or not whole:
        return _sentences(whole, limits), False
    size = limits.count(whole)
    if limits.fits(whole, size):
        return [(whole, size)], False
    header = normalize_text(" ".join(lines[:2]))
    header_size = limits.count(header) if kind == "table" else 0
    if kind == "table" and 2 * header_size <= limits.tokens and 2 * len(header) <= limits.chars:
        row_limits = _Limits(limits.tokens - header_size, limits.chars - len(header) - 1, limits.count)
        return [(f"{header} {piece}", header_size + size) for row in lines[2:] for piece, size in _runs([row], row_limits)], True
    return _runs(lines, limits), False


def _runs(lines: list[str], limits: _Limits) -> list[tuple[str, int]]:
    """Consecutive lines packed up to ``limits``; a line over them split at sentences, else words."""
    runs: list[tuple[str, int]] = []
    for line in lines:
        for piece, size in _sentences(normalize_text(line), limits):
            _add(runs, piece, size, limits)
    return runs


def _sentences(text: str, limits: _Limits) -> list[tuple[str, int]]:
    """``text`` as pieces within ``limits``: whole, else sentences, else words, else parts of words."""
    if not text:
        return []
    size = limits.count(text)
    if limits.fits(text, size):
        return [(text, size)]
    pieces: list[tuple[str, int]] = []
    for sentence in _SENTENCE_END.split(text):
        size = limits.count(sentence)
        if limits.fits(sentence, size):
            pieces.append((sentence, size))
            continue
        pieces.extend(piece for word in sentence.split() for piece in _word_parts(word, limits))
    return pieces


def _word_parts(word: str, limits: _Limits) -> list[tuple[str, int]]:
    """A word as parts within ``limits``: whole, else runs of characters, as long as fit (a link or
    a table's delimiter row can be one word of more tokens than the budget)."""
    size = limits.count(word)
    width = max(1, min(len(word), limits.chars))
    while True:
        parts = [word[i : i + width] for i in range(0, len(word), width)]
        sizes = [limits.count(part) for part in parts] if len(parts) > 1 else [size]
        if width == 1 or max(sizes) <= limits.tokens:
            return list(zip(parts, sizes))
        width //= 2
