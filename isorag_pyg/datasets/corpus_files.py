"""A user's own corpus: JSON / JSON lines / CSV passages, any supported dataset file, or a
``.txt`` / ``.md`` document or folder of them, split into passages under a token budget (a
``.md`` document along its Markdown structure: :mod:`isorag_pyg.datasets.chunking`).

Nothing is dropped silently: malformed records (a CSV row with more fields than its header
included) are errors naming the record; binary, undecodable or empty documents in a folder, its
other files (by kind) and text fields of JSON records that no passage reads are listed in the
:class:`CorpusReport` and logged as a warning.
"""
from __future__ import annotations

import csv
import io
import logging
import re
from pathlib import Path
from typing import Any

from isorag_pyg import defaults
from isorag_pyg.datasets.chunking import TokenCounter, count_words, split_passages, split_title
from isorag_pyg.datasets.corpus_report import DOCUMENT_SUFFIXES, MAX_PASSAGE_CHARS, CorpusReport
from isorag_pyg.datasets.errors import DatasetFormatError
from isorag_pyg.datasets.formats import (
    QUESTION_PARSERS,
    RawPassage,
    _Record,
    corpus_from_records,
    detect_question_format,
    normalize_text,
    question_format,
    read_records,
    read_utf8,
    unwrap_data,
)
from isorag_pyg.datasets.loader import build_corpus
from isorag_pyg.datasets.types import MatchReport, Passage

log = logging.getLogger(__name__)


#: The fields of a passage record that a passage takes (corpus_from_records).
PASSAGE_FIELDS = frozenset({"title", "text", "paragraph_text", "id", "idx"})
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def load_corpus(path: str | Path, max_tokens: int = defaults.MAX_TOKENS, count_tokens: TokenCounter | None = None,
                id_offset: int = 0) -> tuple[list[Passage], CorpusReport]:
    """Read passages from ``path``.

    Args:
        path: a ``.jsonl`` / ``.json`` file of ``{title, text[, id]}`` records (or any dataset
            file the loaders read: a corpus, or questions whose contexts form the corpus), a
            ``.csv`` with ``title`` and ``text`` columns (``id`` optional), or a ``.txt`` / ``.md``
            document or a folder of them (searched recursively).
        max_tokens: for documents, the most tokens of text per passage. (default: ``200``)
        count_tokens: counts the tokens of a string, e.g. with the encoder's tokenizer (see
            :func:`tokenizer_counter`). (default: whitespace-separated words)
        id_offset: records without ids are numbered from here (e.g. an index's ``next_id``).
            (default: ``0``)
    """
    check_max_tokens(max_tokens)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    report = CorpusReport(str(path))
    if reads_documents(path):
        raw = _read_documents(path, max_tokens, count_tokens or count_words, report)
    else:
        raw = _read_csv(path) if path.suffix.lower() == ".csv" else _read_records_file(path, report)
        raw = split_long_passages(raw, max_tokens, count_tokens or count_words, report)
    if not raw:
        raise DatasetFormatError(path, "no passages found" + (f" ({report.summary()})" if report.noteworthy else ""))
    merged = MatchReport()
    corpus = build_corpus(raw, path, merged, id_offset)
    report.passages, report.duplicates_merged = len(corpus), merged.duplicate_passages
    (log.warning if report.noteworthy else log.info)("%s", report.summary())
    return corpus, report


def check_max_tokens(max_tokens: int) -> None:
    """A ``ValueError`` unless ``max_tokens`` is a positive integer."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")


def reads_documents(path: Path) -> bool:
    """Whether ``path`` is read as documents: a folder, or one ``.txt`` / ``.md`` file."""
    return path.is_dir() or path.suffix.lower() in DOCUMENT_SUFFIXES


def tokenizer_counter(model_path: str) -> TokenCounter:
    """Token counts from a Hugging Face tokenizer (e.g. the encoder's own directory)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.model_max_length = 1 << 30  # counting only: no warning about texts longer than the model reads
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _checked(raw: list[RawPassage], path: Path) -> list[RawPassage]:
    for i, p in enumerate(raw):
        if not p.text.strip():
            raise DatasetFormatError(path, "empty passage text", record=i, field="text")
    return raw


def _read_records_file(path: Path, report: CorpusReport) -> list[RawPassage]:
    records = unwrap_data(read_records(path))
    if isinstance(records, list) and records and question_format(records[0]) and not {"text", "paragraph_text"} & set(records[0]):
        return _question_contexts(path, records)  # no passage fields, a question format: a question file
    if isinstance(records, list):
        _check_text_fields(path, records, report)
    return _checked(corpus_from_records(path, records), path)


def _check_text_fields(path: Path, records: list[Any], report: CorpusReport) -> None:
    """No text of a passage record is dropped silently: ``text`` and ``paragraph_text`` that
    differ are an error (one would be dropped); other fields holding text are counted in
    ``report`` (and so logged)."""
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            continue  # corpus_from_records names it
        texts = [record[key] for key in ("text", "paragraph_text") if isinstance(record.get(key), str)]
        if len(texts) == 2 and normalize_text(texts[0]) != normalize_text(texts[1]):
            raise DatasetFormatError(path, "'text' and 'paragraph_text' differ: keep one (the other would be dropped)", record=i)
        report.unread_fields.update(key for key, value in record.items()
                                    if key not in PASSAGE_FIELDS and isinstance(value, str) and value.strip())


def _question_contexts(path: Path, records: list[Any]) -> list[RawPassage]:
    """A question file: its passages are the union of the questions' contexts."""
    parser = QUESTION_PARSERS[detect_question_format(path, records[0])]
    raw: list[RawPassage] = []
    for i, record in enumerate(records):
        question = parser(_Record(path, i, record))
        if question.context is None:
            raise DatasetFormatError(path, "a question file that names gold titles only has no passages; pass its corpus file", record=i)
        raw.extend(RawPassage(None, title, text) for title, text in question.context)
    return _checked(raw, path)


def split_long_passages(raw: list[RawPassage], max_tokens: int, count_tokens: TokenCounter, report: CorpusReport) -> list[RawPassage]:
    """Passages over :data:`MAX_PASSAGE_CHARS` split like documents (:func:`split_passages`),
    their parts ``ID#0``, ``ID#1``, ... (or numbered later, without an id); listed in ``report``."""
    out: list[RawPassage] = []
    for i, p in enumerate(raw):
        if len(p.text) <= MAX_PASSAGE_CHARS:
            out.append(p)
            continue
        report.split_long.append(p.id or f"record {i}")
        out.extend(RawPassage(None if p.id is None else f"{p.id}#{j}", p.title, chunk)
                   for j, chunk in enumerate(split_passages(p.text, max_tokens, count_tokens, markdown=False)))
    return out


def _read_csv(path: Path) -> list[RawPassage]:
    rows: list[tuple[int, dict[str | None, Any]]] = []  # the line each record starts on, and its fields
    reader = csv.DictReader(io.StringIO(read_utf8(path, "utf-8-sig"), newline=""), strict=True)
    start_line = 2  # after the header
    try:
        for row in reader:
            rows.append((start_line, row))
            start_line = reader.line_num + 1
    except csv.Error as err:
        raise DatasetFormatError(path, f"malformed CSV ({err}) in the record starting on line {start_line} (an unterminated quote?)",
                                 record=len(rows)) from None
    columns = set(rows[0][1]) - {None} if rows else set()
    if not rows:
        raise DatasetFormatError(path, "no rows")
    if "text" not in columns:
        raise DatasetFormatError(path, f"needs a 'text' column (found {sorted(c for c in columns if c)})")
    raw = []
    for i, (line, row) in enumerate(rows):
        if None in row:  # DictReader's rest key: fields past the header's, which no column would read
            raise DatasetFormatError(path, f"the record starting on line {line} has {len(reader.fieldnames or []) + len(row[None])} fields, "
                                           f"the header {len(reader.fieldnames or [])}; quote a field that holds commas", record=i)
        if row.get("text") is None:
            raise DatasetFormatError(path, "row has fewer fields than the header", record=i, field="text")
        pid = (row.get("id") or "").strip() or None
        raw.append(RawPassage(pid, (row.get("title") or "").strip(), normalize_text(row["text"])))
    return _checked(raw, path)


def _read_documents(path: Path, max_tokens: int, count_tokens: TokenCounter, report: CorpusReport) -> list[RawPassage]:
    """A folder's documents, ids relative to it, or one document file, ids from its name."""
    if path.is_file():
        return _read_document(path, path.name, max_tokens, count_tokens, report)
    raw: list[RawPassage] = []
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)):
        if file.suffix.lower() not in DOCUMENT_SUFFIXES:
            report.ignored_other.append(str(file.relative_to(path)))
            continue
        raw.extend(_read_document(file, str(file.relative_to(path)), max_tokens, count_tokens, report))
    return raw


def _read_document(file: Path, name: str, max_tokens: int, count_tokens: TokenCounter, report: CorpusReport) -> list[RawPassage]:
    """One document's passages ``name#0``, ``name#1``, ...; none if it is binary, not UTF-8 or
    empty (listed in ``report``, as is a paragraph over :data:`MAX_PASSAGE_CHARS`)."""
    data = file.read_bytes()
    if b"\x00" in data[:8192]:
        report.skipped_binary.append(name)
        return []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        report.skipped_undecodable.append(name)
        return []
    title, body = split_title(text, file.stem)
    chunks = split_passages(body, max_tokens, count_tokens, markdown=file.suffix.lower() == ".md")
    if not chunks:
        report.skipped_empty.append(name)
        return []
    if any(len(normalize_text(paragraph)) > MAX_PASSAGE_CHARS for paragraph in _PARAGRAPH_BREAK.split(body)):
        report.split_long.append(name)
    report.documents += 1
    return [RawPassage(f"{name}#{i}", title, chunk) for i, chunk in enumerate(chunks)]
