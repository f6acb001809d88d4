"""Edge builders for the passage graph. Each returns a ``[2, E]`` long tensor of directed
pairs over corpus rows; :func:`~isorag_pyg.graph.corpus_graph.build_corpus_graph` symmetrises
and merges them."""
from __future__ import annotations

import itertools
import re
from typing import Iterable, Sequence

import ahocorasick
import torch

from isorag_pyg.datasets.types import Passage, QADataset


def _as_edge_index(pairs: list[tuple[int, int]]) -> torch.Tensor:
    if not pairs:
        return torch.empty(2, 0, dtype=torch.long)
    return torch.tensor(pairs, dtype=torch.long).t().contiguous()


def cooccurrence_edges(groups: Iterable[Sequence[int]]) -> torch.Tensor:
    """A clique over every group of rows (each pair once, ``u < v``)."""
    pairs = set()
    for group in groups:
        for u, v in itertools.combinations(sorted(set(group)), 2):
            pairs.add((u, v))
    return _as_edge_index(sorted(pairs))


def context_cooccurrence(corpus: list[Passage], questions: QADataset) -> torch.Tensor:
    """Passages that appear together in one question's context (the ISO-RAG paper's graph).

    Built from the *evaluated* questions this is a leak: the graph then encodes which passages
    each test question was asked over.
    """
    index = {p.id: i for i, p in enumerate(corpus)}
    groups = [[index[c] for c in q.context_ids if c in index] for q in questions.questions if q.context_ids]
    return cooccurrence_edges(groups)


def train_cooccurrence(corpus: list[Passage], train: QADataset) -> tuple[torch.Tensor, int]:
    """Co-occurrence in *training* questions' contexts, mapped onto ``corpus`` by (title, text).

    Returns the edges and how many training context passages were found in ``corpus``.
    """
    row_of = {(p.title, p.text): i for i, p in enumerate(corpus)}
    train_rows = {p.id: row_of.get((p.title, p.text)) for p in train.corpus}
    groups, found = [], 0
    for q in train.questions:
        rows = [r for c in (q.context_ids or []) if (r := train_rows.get(c)) is not None]
        found += len(rows)
        groups.append(rows)
    return cooccurrence_edges(groups), found


_PARENTHETICAL = re.compile(r"\s*\([^)]*\)\s*$")


def title_mention(
    corpus: list[Passage],
    min_title_chars: int = 4,
    case_sensitive: bool = True,
    strip_parenthetical: bool = True,
    max_passages_per_title: int = 5,
) -> torch.Tensor:
    """Edge ``u -> v`` when passage ``u``'s text mentions passage ``v``'s title as whole words.

    One Aho-Corasick pass over all texts. Titles shorter than ``min_title_chars`` and titles
    shared by more than ``max_passages_per_title`` passages are skipped (too ambiguous);
    ``strip_parenthetical`` also matches "Get Low" for the title "Get Low (song)".
    """
    fold = (lambda s: s) if case_sensitive else str.casefold
    targets: dict[str, set[int]] = {}
    for row, p in enumerate(corpus):
        variants = {p.title}
        if strip_parenthetical:
            variants.add(_PARENTHETICAL.sub("", p.title))
        for variant in variants:
            if len(variant) >= min_title_chars:
                targets.setdefault(fold(variant), set()).add(row)
    automaton = ahocorasick.Automaton()
    for key, rows in targets.items():
        if len(rows) <= max_passages_per_title:
            automaton.add_word(key, (len(key), tuple(sorted(rows))))
    if len(automaton) == 0:
        return _as_edge_index([])
    automaton.make_automaton()
    pairs = set()
    for u, p in enumerate(corpus):
        text = fold(p.text)
        for end, (length, rows) in automaton.iter(text):
            start = end - length + 1
            if (start > 0 and text[start - 1].isalnum()) or (end + 1 < len(text) and text[end + 1].isalnum()):
                continue
            pairs.update((u, v) for v in rows if v != u)
    return _as_edge_index(sorted(pairs))


def knn(x: torch.Tensor, k: int = 5, chunk_size: int = 4096, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Edge ``u -> v`` for the ``k`` nearest cosine neighbours ``v`` of every ``u`` (or of every
    ``u`` in ``rows``: an index update recomputes only the rows whose neighbours may change).

    Rows are processed ``chunk_size`` at a time, so memory is ``chunk_size x N``, never ``N x N``.
    """
    n = x.size(0)
    k = min(k, n - 1)
    if k <= 0:
        return _as_edge_index([])
    unit = torch.nn.functional.normalize(x.float(), dim=-1)
    sources, targets = [], []
    wanted = torch.arange(n, device=x.device) if rows is None else rows.to(x.device)
    if wanted.numel() == 0:
        return _as_edge_index([])
    for start in range(0, wanted.numel(), chunk_size):
        rows = wanted[start : start + chunk_size]
        sims = unit[rows] @ unit.t()
        sims[torch.arange(rows.numel(), device=x.device), rows] = float("-inf")
        top = sims.topk(k, dim=1).indices
        sources.append(rows.repeat_interleave(k))
        targets.append(top.reshape(-1))
    return torch.stack([torch.cat(sources), torch.cat(targets)]).cpu()
