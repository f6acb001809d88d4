"""Readers for the native multi-hop QA file formats, auto-detected per file.

Question formats (detected from the first record):

* ``musique``     official MuSiQue: ``id, question, answer, answer_aliases, paragraphs``
* ``hotpot``      official HotpotQA / 2WikiMultihopQA: ``context`` + ``supporting_facts``
* ``ircot``       IRCoT processed: ``question_id, question_text, answers_objects, contexts``
* ``titles_only`` HippoRAG / GFM-RAG: ``supporting_facts`` is a list of gold titles

Corpus formats: a list of ``{title, text}`` records (``paragraph_text`` also accepted, ``id``/``idx``
kept when present; or ``{"data": [...]}`` of them) or a dict ``{title: [sentences]}`` / ``{title: text}``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isorag_pyg.datasets.errors import DatasetFormatError


@dataclass
class RawQuestion:
    id: str
    text: str
    answers: list[str]
    gold: list[tuple[str, str | None]]  # (title, text or None when the format gives titles only)
    context: list[tuple[str, str]] | None
    hop_type: str | None


@dataclass
class RawPassage:
    id: str | None
    title: str
    text: str


def normalize_text(text: str) -> str:
    """Collapse runs of whitespace: the form in which passages are stored and matched."""
    return " ".join(text.split())


def unwrap_data(records: Any) -> Any:
    """The records of a file wrapped as ``{"data": [{...}, ...]}``, else ``records`` (a
    ``{title: [sentences]}`` corpus's lists hold strings, not records)."""
    if isinstance(records, dict) and isinstance(data := records.get("data"), list) and (all(isinstance(r, dict) for r in data) if data else len(records) == 1):
        return data
    return records


def read_records(path: str | Path) -> Any:
    """Read ``.json`` (one document) or ``.jsonl`` (one document a line)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    raw = read_utf8(path)
    if not raw.strip():
        raise DatasetFormatError(path, "file is empty")
    if path.suffix != ".jsonl":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            first_line_ok = _parses(raw.split("\n", 1)[0])
            if not first_line_ok:
                raise DatasetFormatError(path, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from err
    records = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise DatasetFormatError(path, f"invalid JSON on line {lineno}: {err.msg}", record=len(records)) from err
    return records


def read_utf8(path: Path, encoding: str = "utf-8") -> str:
    """A text file's content; bytes that are not UTF-8 are a :class:`DatasetFormatError` naming
    the file, the line and the byte offset."""
    data = path.read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DatasetFormatError(path, f"not UTF-8 text: byte 0x{data[err.start]:02x} on line {line} (byte offset {err.start}); "
                                       "re-save the file as UTF-8") from None


def _parses(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except json.JSONDecodeError:
        return False


class _Record:
    """Field access that raises a DatasetFormatError naming file, record and field."""

    def __init__(self, path: Path, index: int, data: Any):
        if not isinstance(data, dict):
            raise DatasetFormatError(path, f"expected a JSON object, got {type(data).__name__}", record=index)
        self.path, self.index, self.data = path, index, data

    def get(self, *names: str, kind: type | tuple[type, ...] = object, required: bool = True, default: Any = None) -> Any:
        for name in names:
            if name in self.data:
                value = self.data[name]
                if not isinstance(value, kind):
                    raise self.error(name, f"expected {_kind_name(kind)}, got {type(value).__name__}")
                return value
        if required:
            raise self.error(" or ".join(names), "missing")
        return default

    def error(self, field: str, problem: str) -> DatasetFormatError:
        return DatasetFormatError(self.path, problem, record=self.index, field=field)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _answers(rec: _Record, answer_field: str = "answer") -> list[str]:
    answer = rec.get(answer_field, kind=(str, int, float), required=False, default=None)
    aliases = rec.get("answer_aliases", kind=list, required=False, default=[])
    answers = ([str(answer)] if answer is not None else []) + [str(a) for a in aliases]
    return list(dict.fromkeys(answers))


def _hop_type_from_id(qid: str) -> str | None:
    match = re.match(r"(\d)hop", qid)
    return f"{match.group(1)}hop" if match else None


def _parse_musique(rec: _Record) -> RawQuestion:
    qid = str(rec.get("id", kind=(str, int)))
    context, gold = [], []
    for j, para in enumerate(rec.get("paragraphs", kind=list)):
        if not isinstance(para, dict) or "title" not in para or "paragraph_text" not in para:
            raise rec.error(f"paragraphs[{j}]", "needs 'title' and 'paragraph_text'")
        item = (str(para["title"]).strip(), normalize_text(str(para["paragraph_text"])))
        context.append(item)
        if para.get("is_supporting"):
            gold.append(item)
    return RawQuestion(qid, rec.get("question", kind=str), _answers(rec), gold, context, _hop_type_from_id(qid))


def _parse_hotpot(rec: _Record) -> RawQuestion:
    qid = str(rec.get("_id", "id", kind=(str, int)))
    context: list[tuple[str, str]] = []
    for j, item in enumerate(rec.get("context", kind=list)):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
            raise rec.error(f"context[{j}]", "expected [title, [sentences]]")
        context.append((str(item[0]).strip(), normalize_text(" ".join(map(str, item[1])))))
    by_title = {title: text for title, text in context}
    gold: list[tuple[str, str | None]] = []
    for j, fact in enumerate(rec.get("supporting_facts", kind=list)):
        title = fact[0] if isinstance(fact, list) and fact else fact
        if not isinstance(title, str):
            raise rec.error(f"supporting_facts[{j}]", "expected [title, sentence index] or a title")
        title = title.strip()
        if all(g[0] != title for g in gold):
            gold.append((title, by_title.get(title)))
    hop_type = rec.get("type", kind=str, required=False)
    return RawQuestion(qid, rec.get("question", kind=str), _answers(rec), gold, context, hop_type)


def _parse_ircot(rec: _Record) -> RawQuestion:
    qid = str(rec.get("question_id", kind=(str, int)))
    answers: list[str] = []
    for obj in rec.get("answers_objects", kind=list):
        answers.extend(str(s) for s in (obj.get("spans", []) if isinstance(obj, dict) else []))
    context, gold = [], []
    for j, para in enumerate(rec.get("contexts", kind=list)):
        if not isinstance(para, dict) or "paragraph_text" not in para:
            raise rec.error(f"contexts[{j}]", "needs 'paragraph_text'")
        item = (str(para.get("title", "")).strip(), normalize_text(str(para["paragraph_text"])))
        context.append(item)
        if para.get("is_supporting"):
            gold.append(item)
    text = rec.get("question_text", kind=str)
    return RawQuestion(qid, text, list(dict.fromkeys(answers)), gold, context, _hop_type_from_id(qid))


def _parse_titles_only(rec: _Record) -> RawQuestion:
    qid = str(rec.get("id", "_id", kind=(str, int)))
    gold: list[tuple[str, str | None]] = []
    for j, title in enumerate(rec.get("supporting_facts", kind=list)):
        if isinstance(title, list) and title:
            title = title[0]
        if not isinstance(title, str):
            raise rec.error(f"supporting_facts[{j}]", "expected a title string")
        if all(g[0] != title.strip() for g in gold):
            gold.append((title.strip(), None))
    hop_type = rec.get("type", kind=str, required=False)
    return RawQuestion(qid, rec.get("question", kind=str), _answers(rec), gold, None, hop_type)


QUESTION_PARSERS: dict[str, Callable[[_Record], RawQuestion]] = {
    "musique": _parse_musique,
    "hotpot": _parse_hotpot,
    "ircot": _parse_ircot,
    "titles_only": _parse_titles_only,
}


def question_format(first: Any) -> str | None:
    """The question format of a file whose first record is ``first``; ``None`` if it is none of them."""
    if not isinstance(first, dict):
        return None
    keys = set(first)
    if "paragraphs" in keys:
        return "musique"
    if {"question_text", "contexts"} <= keys:
        return "ircot"
    if {"context", "supporting_facts"} <= keys:
        return "hotpot"
    if "supporting_facts" in keys and "question" in keys:
        return "titles_only"
    return None


def detect_question_format(path: Path, first: Any) -> str:
    if not isinstance(first, dict):
        raise DatasetFormatError(path, f"expected question objects, got {type(first).__name__}", record=0)
    fmt = question_format(first)
    if fmt is None:
        raise DatasetFormatError(
            path,
            f"unrecognised question format (keys: {sorted(first)}); expected MuSiQue, HotpotQA/2Wiki, IRCoT or titles-only",
            record=0,
        )
    return fmt


def read_questions(path: str | Path) -> tuple[str, list[RawQuestion]]:
    """Read a question file in any supported format; returns (format name, questions)."""
    path = Path(path)
    records = unwrap_data(read_records(path))
    if not isinstance(records, list):
        raise DatasetFormatError(path, f"expected a list of questions, got {type(records).__name__}")
    if not records:
        raise DatasetFormatError(path, "no questions in file")
    fmt = detect_question_format(path, records[0])
    parser = QUESTION_PARSERS[fmt]
    questions = [parser(_Record(path, i, r)) for i, r in enumerate(records)]
    seen: dict[str, int] = {}
    for i, q in enumerate(questions):
        if not q.text.strip():
            raise DatasetFormatError(path, "empty question text", record=i, field="question")
        if q.id in seen:
            raise DatasetFormatError(path, f"duplicate question id {q.id!r} (first at record {seen[q.id]})", record=i, field="id")
        seen[q.id] = i
    return fmt, questions


def read_corpus(path: str | Path) -> list[RawPassage]:
    """Read a corpus file, in any of the corpus formats (module docstring)."""
    path = Path(path)
    return corpus_from_records(path, unwrap_data(read_records(path)))


def corpus_from_records(path: Path, records: Any) -> list[RawPassage]:
    """:func:`read_corpus` of a file already parsed and unwrapped (``records``, see
    :func:`unwrap_data`; ``path`` names it in errors)."""
    passages: list[RawPassage] = []
    if isinstance(records, dict):
        for i, (title, body) in enumerate(records.items()):
            if isinstance(body, list) and all(isinstance(s, (str, int, float)) for s in body):
                text = normalize_text(" ".join(map(str, body)))
            elif isinstance(body, str):
                text = normalize_text(body)
            else:
                got = "list holding records or lists" if isinstance(body, list) else type(body).__name__
                raise DatasetFormatError(path, f"expected a list of sentences or a text, got {got}", record=i, field=title)
            passages.append(RawPassage(None, str(title).strip(), text))
    elif isinstance(records, list):
        for i, data in enumerate(records):
            rec = _Record(path, i, data)
            text = rec.get("text", "paragraph_text", kind=str)
            pid = rec.get("id", "idx", kind=(str, int), required=False)
            title = rec.get("title", kind=str, required=False, default="")
            passages.append(RawPassage(None if pid is None else str(pid), title.strip(), normalize_text(text)))
    else:
        raise DatasetFormatError(path, f"expected a list or dict corpus, got {type(records).__name__}")
    if not passages:
        raise DatasetFormatError(path, "corpus is empty")
    for i, p in enumerate(passages):
        if not p.text and not p.title:
            raise DatasetFormatError(path, "passage has neither title nor text", record=i, field="text")
    return passages
