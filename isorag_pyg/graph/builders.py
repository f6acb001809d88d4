"""Edge builders for the passage graph. Each returns a ``[2, E]`` long tensor of directed
pairs over corpus rows (weighted builders: that and an ``[E]`` weight);
:func:`~isorag_pyg.graph.corpus_graph.build_corpus_graph` symmetrises and merges them."""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

import ahocorasick
import regex
import torch

from isorag_pyg.datasets.types import Passage, QADataset
from isorag_pyg.graph.text import normalize_unicode, title_variants


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


#: The builders' version (:data:`~isorag_pyg.graph.BUILDERS_VERSION`, kept in a saved graph's statistics) since which the
#: entity graph reads titles title-cased too and entity keys drop Latin accents.
TITLES_READ_AS_NAMES_SINCE = 5

#: Builders whose pairs have a direction: ``u -> v`` when passage ``u`` mentions passage ``v``
#: (its title). The reverse of such an edge is a *backlink*: a passage can write any number of
#: mentions of others, but not the mentions others make of it.
DIRECTED_BUILDERS = frozenset({"title_mention"})


def mention_edges(edge_source: torch.Tensor, builders: Sequence[str], edge_backlink: torch.Tensor | None) -> torch.Tensor | None:
    """``[E]`` bool, the edges of a corpus graph (bitmask ``edge_source`` over ``builders``) along
    which a passage names the other's title: made by ``title_mention`` alone, and not only as the
    reverse of a mention (``edge_backlink``). An edge another builder made too (kNN, adjacent
    chunks) is left out: ``edge_backlink`` then no longer tells which way the mention points.
    ``None`` where the graph has no title mentions or does not record their direction."""
    if "title_mention" not in builders or edge_backlink is None:
        return None
    return edge_source.eq(1 << list(builders).index("title_mention")) & ~edge_backlink.bool()


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
    ``strip_parenthetical`` also matches "Get Low" for the title "Get Low (song)". Chunks of
    one document (ids ``path#n`` under one title) do not link through the title they share: a
    document naming its own subject mentions no other passage (the ``adjacent`` builder links
    consecutive chunks).
    """
    fold = (lambda s: s) if case_sensitive else str.casefold
    targets: dict[str, set[int]] = {}
    for row, p in enumerate(corpus):
        for variant in title_variants(p.title) if strip_parenthetical else {p.title}:
            if len(variant) >= min_title_chars:
                targets.setdefault(fold(variant), set()).add(row)
    automaton = ahocorasick.Automaton()
    for key, rows in targets.items():
        if len(rows) <= max_passages_per_title:
            automaton.add_word(key, (len(key), tuple(sorted(rows))))
    if len(automaton) == 0:
        return _as_edge_index([])
    automaton.make_automaton()
    document = [position[0] if (position := chunk_position(p.id)) is not None else None for p in corpus]
    pairs = set()
    for u, p in enumerate(corpus):
        text = fold(p.text)
        for end, (length, rows) in automaton.iter(text):
            start = end - length + 1
            if (start > 0 and text[start - 1].isalnum()) or (end + 1 < len(text) and text[end + 1].isalnum()):
                continue
            pairs.update((u, v) for v in rows if v != u and not (document[u] is not None and document[u] == document[v] and p.title == corpus[v].title))
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


# a run of capitalised words (any script's capitals: "Émile Zola", "Øresund"), optionally joined
# by lower-case name particles ("Bishop of Elmham", "Boso the Elder", "Ludwig van Beethoven");
# apostrophes and hyphens stay inside a word, a dot ends it (so "... Lotharingia. He ..." is two spans)
_CAPITALISED_SPAN = regex.compile(r"[\p{Lu}\p{Lt}][\w'’\-]*(?:\s+(?:(?:of|the|de|da|del|der|di|du|la|le|van|von)\s+)*[\p{Lu}\p{Lt}][\w'’\-]*)*")
_PARTICLES = re.compile(r"\s+(?:(?:of|the|de|da|del|der|di|du|la|le|van|von)\s+)+")
# a possessive inside a span: what precedes it names the owner ("Dara Quen's Velmora")
_OWNER = re.compile(r"^(.+?)(?:'s|’s)\s")
_POSSESSIVE = re.compile(r"(?:'s|’s|['’\-])+$")
# sentence-initial function words that are capitalised but name nothing ("In Paris" -> "Paris")
_LEADING_WORDS = frozenset(
    ["a", "an", "and", "as", "at", "after", "before", "but", "by", "during", "for", "from", "he", "her", "his", "however", "if", "in", "it", "its", "many", "most", "of", "on", "one", "she", "since", "some", "that", "the", "their", "there", "these", "they", "this", "those", "to", "under", "when", "where", "which", "while", "who", "with"]
)


def entity_mentions(text: str, min_chars: int = 4) -> set[str]:
    """Casefolded capitalised spans of ``text`` ("the name-like strings it mentions"): each span,
    without leading function words or a closing possessive, and also its parts split at name
    particles ("Lothair II of Lotharingia" -> itself, "lothair ii", "lotharingia") and the owner
    of a possessive inside it ("Dara Quen's Velmora" -> itself, "dara quen"). The text is
    normalised first (:func:`~isorag_pyg.graph.text.normalize_unicode`), so composed and decomposed
    accents, full-width letters and digits read alike and a footnote mark is no part of a name."""
    return names_in_normalized(normalize_unicode(text), min_chars)


def names_in_normalized(text: str, min_chars: int = 4) -> set[str]:
    """:func:`entity_mentions` of text already normalised by :func:`~isorag_pyg.graph.text.normalize_unicode` (once, by a caller that also reads it otherwise)."""
    found = set()
    for match in _CAPITALISED_SPAN.finditer(text):
        words = match.group().split()
        while words and words[0].casefold() in _LEADING_WORDS:
            words = words[1:]
        if not words:
            continue
        span = " ".join(words)
        parts = {span, *_PARTICLES.split(span)}
        for part in {owner[1] for part in parts if (owner := _OWNER.match(part))} | parts:
            part = _POSSESSIVE.sub("", part).casefold()
            if len(part) >= min_chars and part not in _LEADING_WORDS:
                found.add(part)
    return found


def entity_comention(
    corpus: list[Passage],
    max_df: int = 20,
    min_chars: int = 4,
    weighting: str = "none",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Passages ``u < v`` linked when they mention a common entity: a capitalised span of their
    texts (:func:`entity_mentions`) or a passage's own title (without a parenthetical), shared
    by at most ``max_df`` passages (its document frequency). Generic names ("American",
    "Paris") are shared by many passages, so the larger ``max_df`` the more hub-like noise.

    ``weighting`` scores the specificity of what an edge rests on: ``"none"`` (weight 1 per
    linked pair), ``"count"`` (the number of shared entities), ``"inverse_df"`` (the sum of
    ``1 / df`` over shared entities, as HippoRAG 2 divides a phrase node's weight by the
    passages containing it) or ``"idf"`` (the sum of ``log(N / df)``).

    Returns the edges (each pair once) and their weights.
    """
    if weighting not in ("none", "count", "inverse_df", "idf"):
        raise ValueError(f"weighting must be 'none', 'count', 'inverse_df' or 'idf', got {weighting!r}")
    if max_df < 2:
        raise ValueError(f"max_df must be >= 2 (an entity links the passages that share it), got {max_df}")
    n = len(corpus)
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for row, p in enumerate(corpus):
        names = entity_mentions(p.text, min_chars)
        title = normalize_unicode(p.title).strip()  # as entity_mentions reads the text
        for variant in title_variants(title):
            if len(variant) >= min_chars:
                names.add(variant.casefold())
        for name in names:
            rows.append(row)
            cols.append(vocabulary.setdefault(name, len(vocabulary)))
    if not rows:
        return _as_edge_index([]), torch.empty(0)
    rows_t, cols_t = torch.tensor(rows), torch.tensor(cols)
    df = torch.bincount(cols_t, minlength=len(vocabulary)).double()
    specific = (df[cols_t] >= 2) & (df[cols_t] <= max_df)
    rows_t, cols_t = rows_t[specific], cols_t[specific]
    if weighting == "inverse_df":
        entity_weight = 1.0 / df
    elif weighting == "idf":
        entity_weight = torch.log(n / df)
    else:
        entity_weight = torch.ones_like(df)
    # every pair of passages within an entity's group, weighted by that entity, summed per pair
    order = torch.argsort(cols_t, stable=True)
    rows_t, cols_t = rows_t[order], cols_t[order]
    group_end = torch.searchsorted(cols_t, cols_t, right=True)
    partners = group_end - torch.arange(cols_t.numel()) - 1  # later members of the same group
    total = int(partners.sum())
    position = torch.repeat_interleave(torch.arange(cols_t.numel()), partners, output_size=total)
    offset = torch.arange(total) - (partners.cumsum(0) - partners)[position]
    u, v = rows_t[position], rows_t[position + 1 + offset]
    pairs = torch.stack([torch.minimum(u, v), torch.maximum(u, v)])
    from torch_geometric.utils import coalesce  # here: the query-side entity matcher imports this module's names_in_normalized

    edge_index, w = coalesce(pairs, entity_weight[cols_t[position]], num_nodes=n, reduce="sum")
    w = torch.ones(w.numel()) if weighting == "none" else w.float()
    return edge_index, w


_CHUNK_ID = re.compile(r"^(?P<document>.+)#(?P<chunk>\d+)$")


def chunk_position(passage_id: str) -> tuple[str, int] | None:
    """(document, chunk number) of a folder reader's ``path#n`` id, else ``None``."""
    match = _CHUNK_ID.match(passage_id)
    return (match["document"], int(match["chunk"])) if match else None


def adjacent(corpus: list[Passage]) -> torch.Tensor:
    """Edge between consecutive chunks ``path#n`` and ``path#n+1`` of one document (the ids of
    :func:`~isorag_pyg.datasets.corpus_files.load_corpus`'s folder reader); other ids link nothing."""
    row_of = {position: row for row, p in enumerate(corpus) if (position := chunk_position(p.id)) is not None}
    pairs = [(row, nxt) for (document, chunk), row in row_of.items() if (nxt := row_of.get((document, chunk + 1))) is not None]
    return _as_edge_index(sorted(pairs))
