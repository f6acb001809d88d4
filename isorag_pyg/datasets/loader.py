"""Turn raw question/corpus files into a :class:`QADataset` with gold passages matched to the corpus."""
from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

from isorag_pyg.datasets.errors import DatasetFormatError
from isorag_pyg.datasets.formats import RawPassage, RawQuestion, read_corpus, read_questions
from isorag_pyg.datasets.types import MatchReport, Passage, QADataset, Question

log = logging.getLogger(__name__)


def sibling_corpus_path(questions_path: Path) -> Path | None:
    """HippoRAG's layout: ``<name>.json`` beside ``<name>_corpus.json``."""
    candidate = questions_path.with_name(f"{questions_path.stem}_corpus.json")
    return candidate if candidate.is_file() else None


def build_corpus(raw: list[RawPassage], source: str | Path, report: MatchReport, id_offset: int = 0) -> list[Passage]:
    """De-duplicate by (title, text) and keep the given ids; passages without ids are numbered
    from ``id_offset``. Records with and without ids in one source are an error naming the
    first record of the fewer kind; identical passages under two ids are logged and listed in
    ``report.duplicate_ids`` as (kept id, dropped id)."""
    check_ids_all_or_none(raw, source)
    use_given_ids = bool(raw) and raw[0].id is not None
    seen_keys: dict[tuple[str, str], str] = {}
    seen_ids: dict[str, int] = {}
    corpus: list[Passage] = []
    for i, p in enumerate(raw):
        key = (p.title, p.text)
        if key in seen_keys:
            report.duplicate_passages += 1
            if use_given_ids and p.id != seen_keys[key]:
                report.duplicate_ids.append((seen_keys[key], p.id))
            continue
        pid = p.id if use_given_ids else str(id_offset + len(corpus))
        if pid in seen_ids:
            raise DatasetFormatError(source, f"duplicate passage id {pid!r} (first at record {seen_ids[pid]})", record=i, field="id")
        seen_keys[key] = pid
        seen_ids[pid] = i
        corpus.append(Passage(pid, p.title, p.text))
    if not corpus:
        raise DatasetFormatError(source, "corpus is empty")
    if report.duplicate_ids:
        log.warning("%s: %d passages identical to an earlier one under another id dropped (kept id, dropped id): %s", source,
                    len(report.duplicate_ids), ", ".join(f"{kept!r} kept, {dropped!r} dropped" for kept, dropped in report.duplicate_ids[:10]))
    return corpus


def check_ids_all_or_none(raw: list[RawPassage], source: str | Path) -> None:
    """Every record carries an id, or none does: a mix is an error naming the first record of
    the fewer kind (never a silent renumbering)."""
    with_id = [i for i, p in enumerate(raw) if p.id is not None]
    if 0 < len(with_id) < len(raw):
        without = [i for i, p in enumerate(raw) if p.id is None]
        minority, kind = (with_id, "has an id") if len(with_id) <= len(without) else (without, "has no id")
        raise DatasetFormatError(source, f"{kind}, unlike {len(raw) - len(minority)} of the {len(raw)} records: give every "
                                         "passage an id or none (then ids are assigned)", record=minority[0], field="id")


class _GoldMatcher:
    """Exact (title, text) matching, then title, then case-insensitive title; counts each path."""

    def __init__(self, corpus: list[Passage], report: MatchReport):
        self.report = report
        self.by_key = {(p.title, p.text): p.id for p in corpus}
        self.by_title: dict[str, list[str]] = defaultdict(list)
        self.by_casefold: dict[str, list[str]] = defaultdict(list)
        for p in corpus:
            self.by_title[p.title].append(p.id)
            self.by_casefold[p.title.casefold()].append(p.id)

    def context(self, title: str, text: str) -> str | None:
        pid = self.by_key.get((title, text))
        if pid is None:
            self.report.unmatched_context += 1
        return pid

    def gold(self, qid: str, title: str, text: str | None) -> list[str]:
        if text is not None and (title, text) in self.by_key:
            self.report.exact += 1
            return [self.by_key[(title, text)]]
        ids = self.by_title.get(title)
        if ids:
            self.report.title_only += 1
        else:
            ids = self.by_casefold.get(title.casefold())
            if ids:
                self.report.casefold_fallback += 1
        if not ids:
            self.report.unmatched.append((qid, title))
            return []
        if len(ids) > 1:
            self.report.ambiguous_title += 1
        return list(ids)


def load_qa_dataset(
    questions_path: str | Path,
    corpus_path: str | Path | None = None,
    name: str | None = None,
    corpus: list[Passage] | None = None,
) -> QADataset:
    """Load questions in any supported format plus their corpus.

    Without ``corpus_path`` a sibling ``<stem>_corpus.json`` is used when present, else the
    corpus is the union of all questions' contexts de-duplicated by (title, text). A ``corpus``
    given as passages (e.g. an index's) is used as it is, and gold passages are matched to it.
    """
    questions_path = Path(questions_path)
    fmt, raw_questions = read_questions(questions_path)
    corpus_path = Path(corpus_path) if corpus_path is not None else sibling_corpus_path(questions_path)
    report = MatchReport()
    if corpus is None and corpus_path is not None:
        corpus = build_corpus(read_corpus(corpus_path), corpus_path, report)
    elif corpus is None:
        if any(q.context is None for q in raw_questions):
            raise DatasetFormatError(
                questions_path, f"format '{fmt}' gives gold titles only; pass the corpus file (corpus_path)"
            )
        union = [RawPassage(None, t, x) for q in raw_questions for t, x in (q.context or [])]
        corpus = build_corpus(union, questions_path, report)
        report.duplicate_passages = 0  # shared contexts are expected, not duplicates
    matcher = _GoldMatcher(corpus, report)
    questions = [_match_question(q, matcher) for q in raw_questions]
    dataset = QADataset(name or questions_path.stem, questions, corpus, report)
    _log_report(questions_path, fmt, dataset)
    return dataset


def _match_question(q: RawQuestion, matcher: _GoldMatcher) -> Question:
    context_ids = None
    if q.context is not None:
        context_ids = [pid for t, x in q.context if (pid := matcher.context(t, x)) is not None]
    gold: list[str] = []
    for title, text in q.gold:
        gold.extend(pid for pid in matcher.gold(q.id, title, text) if pid not in gold)
    return Question(q.id, q.text, q.answers, gold, context_ids, q.hop_type)


def _log_report(path: Path, fmt: str, dataset: QADataset) -> None:
    summary = dataset.report.summary()
    log.info("%s: format=%s questions=%d passages=%d %s", path, fmt, len(dataset.questions), len(dataset.corpus), summary)
    if dataset.report.unmatched:
        shown = ", ".join(f"{q}:{t!r}" for q, t in dataset.report.unmatched[:5])
        log.warning("%s: %d gold passages not found in the corpus (e.g. %s)", path, len(dataset.report.unmatched), shown)
    if dataset.report.casefold_fallback:
        log.warning("%s: %d gold titles matched only case-insensitively", path, dataset.report.casefold_fallback)
