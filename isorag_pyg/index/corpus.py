"""Corpus intake: passages from files, folders or dicts, validated and merged, and the hash that
identifies a corpus."""
from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from isorag_pyg import defaults
from isorag_pyg.datasets.corpus_files import check_max_tokens, load_corpus, reads_documents, tokenizer_counter
from isorag_pyg.datasets.corpus_report import MAX_PASSAGE_CHARS
from isorag_pyg.datasets.formats import RawPassage
from isorag_pyg.datasets.loader import build_corpus
from isorag_pyg.datasets.types import MatchReport, Passage
from isorag_pyg.encoders.sentence import resolve_model
from isorag_pyg.index.results import ENTITY_NODE_PREFIX

log = logging.getLogger(__name__)


def read_corpus(path: str | Path, max_tokens: int = defaults.MAX_TOKENS, encoder: str | None = defaults.ENCODER,
                id_offset: int = 0) -> list[Passage]:
    """Passages from a JSON / JSON-lines / CSV file, any dataset file, or a ``.txt`` / ``.md``
    document or folder of them split at paragraphs into at most ``max_tokens`` tokens of
    ``encoder``'s tokenizer (``None``: words). Skipped files are counted and logged; records
    without ids are numbered from ``id_offset`` (to add them to an index: its ``next_id``)."""
    check_max_tokens(max_tokens)  # before the tokenizer loads
    counter = tokenizer_counter(resolve_model(encoder)) if encoder is not None and reads_documents(Path(path)) else None
    passages, _ = load_corpus(path, max_tokens, counter, id_offset)
    return passages


def corpus_tokenizer(encoder: str | None, backend: str = "torch") -> str | None:
    """The tokenizer that counts a document's tokens when it is split into passages: the encoder's
    own (default :data:`~isorag_pyg.defaults.ENCODER`), or none (words) for a server's model
    (``backend="openai"``), whose tokenizer is not on this machine."""
    return None if backend == "openai" else encoder or defaults.ENCODER


def corpus_hash(passages: Iterable[Passage]) -> str:
    """Identifies a corpus: its passages' ids, titles and texts, in order."""
    digest = hashlib.sha256()
    for p in passages:
        for part in (p.id, p.title, p.text):
            encoded = part.encode()
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()


_DIGITS = re.compile(r"\d+")


def template_key(passage: Passage) -> bytes:
    """A digest of ``passage``'s title and text with every run of digits read as one ``0``: equal
    for passages that differ only in their numbers ("Acme Widget 1 ..." to "Acme Widget 9999 ...",
    a generated catalogue or log). 16 bytes a passage, whatever its length."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (passage.title, passage.text):
        encoded = _DIGITS.sub("0", part).encode()
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.digest()


def near_duplicates(passages: Iterable[Passage], known: Iterable[Passage] = ()) -> tuple[int, Passage | None]:
    """How many of ``passages`` repeat the :func:`template_key` of a passage of ``known`` or of
    one before them (the same text but for its numbers), and one passage of the most repeated
    template (``None`` when there are none). One pass, 16 bytes of memory a passage."""
    seen = {template_key(p) for p in known}
    repeats: Counter[bytes] = Counter()
    example: dict[bytes, Passage] = {}
    for p in passages:
        key = template_key(p)
        if key in seen:
            repeats[key] += 1
            example.setdefault(key, p)
        seen.add(key)
    if not repeats:
        return 0, None
    return sum(repeats.values()), example[repeats.most_common(1)[0][0]]


def as_passages(passages: Sequence[Passage | Mapping[str, Any]], id_offset: int = 0, report: MatchReport | None = None) -> list[Passage]:
    """Passages from ``Passage`` objects or dicts with ``text`` (and ``title``, ``id``): empty texts,
    texts over :data:`MAX_PASSAGE_CHARS`, ids starting with ``entity:`` (entity nodes' names), conflicting ids and a mix of passages with and without
    ids are errors; identical (title, text) pairs are merged (logged, and listed in ``report``);
    without ids, passages are numbered from ``id_offset``."""
    if isinstance(passages, (str, bytes)):
        raise TypeError(f"expected a list of passages (Passage objects or dicts with 'text'), got the string {passages!r:.80}")
    if not passages:
        raise ValueError("no passages given")
    raw = []
    for i, p in enumerate(passages):
        if isinstance(p, Passage):
            raw.append(RawPassage(p.id, p.title, p.text))
            continue
        if not isinstance(p, Mapping) or not isinstance(p.get("text"), str):
            raise ValueError(f"passage {i}: expected a Passage or a dict with a 'text' string, got {p!r:.80}")  # noqa: TRY004 - bad input is ValueError here
        pid = p.get("id")
        raw.append(RawPassage(None if pid is None else str(pid), str(p.get("title") or "").strip(), " ".join(p["text"].split())))
    for i, p in enumerate(raw):
        if p.id is not None and p.id.startswith(ENTITY_NODE_PREFIX):
            raise ValueError(f"passage {i} has the id {p.id!r}: ids starting with {ENTITY_NODE_PREFIX!r} name an entity graph's entity nodes")
        if not p.text:
            raise ValueError(f"passage {i} ({p.id or p.title!r}) has an empty text")
        if len(p.text) > MAX_PASSAGE_CHARS:
            raise ValueError(f"passage {i} ({p.id or p.title!r}) has {len(p.text)} characters, over the limit of {MAX_PASSAGE_CHARS}: "
                             "split it (isorag_pyg.datasets.chunking.split_passages, or read it with ISORAGIndex.read_corpus)")
    report = report if report is not None else MatchReport()
    corpus = build_corpus(raw, "passages", report, id_offset)
    if report.duplicate_passages:
        log.warning("%d duplicate passages (same title and text) merged", report.duplicate_passages)
    return corpus
