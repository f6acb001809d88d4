"""The entity graph: passage nodes plus entity nodes, an edge for every mention of an entity in a
passage (weighted by the entity's specificity) and, from extracted triples, edges between
entities (HippoRAG's graph, without its LLM when the rule extractor is used).

Passage nodes keep their corpus rows ``0..N-1``; entity nodes follow as rows ``N..N+E-1`` (in
order of first mention), so every passage-indexed tensor of an index stays valid and retrieval
ranks rows ``< N`` only.
"""
from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from isorag_pyg.graph.extraction import Extraction
from isorag_pyg.graph.extractors import EXTRACTORS
from isorag_pyg.graph.text import near_duplicate_key, normalize_entity

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EntityGraph:
    """What :func:`entity_graph` builds over ``num_passages`` passages."""

    names: list[str]  # entity node ``N + i``'s display name (its most frequent surface form)
    mentions: Tensor  # [2, M] (passage row, entity node row)
    relations: Tensor  # [2, R] (entity node row, entity node row) from triples
    passages_without_entities: int
    mention_weight: Tensor  # [M] each mention's weight (:func:`specificity`)
    ungrounded: dict[str, int] = field(default_factory=dict)  # what the extractor dropped (:class:`Extraction`)
    unique_mentions: dict[str, int] = field(default_factory=dict)  # :func:`~isorag_pyg.graph.text.entity_key` -> the one passage (row) that mentions it
    boilerplate: dict[str, int] = field(default_factory=dict)  # boilerplate entities left out: display name -> passages, most first

    @property
    def record(self) -> dict[str, Any]:
        """What the builder did beyond its edges, for the graph's statistics: its counts, what the
        extractor dropped (``ungrounded_*``), and the boilerplate entities left out (how many, and
        the :data:`BOILERPLATE_SHOWN` most frequent as ``[name, passages]``)."""
        return {"entities": len(self.names), "mentions": self.mentions.size(1), "relations": self.relations.size(1),
                "passages_without_entities": self.passages_without_entities,
                **{f"ungrounded_{kind}": count for kind, count in self.ungrounded.items()},
                "boilerplate_entities": len(self.boilerplate),
                "boilerplate_top": [[name, count] for name, count in list(self.boilerplate.items())[:BOILERPLATE_SHOWN]]}

    @property
    def edge_index(self) -> Tensor:
        return torch.cat([self.mentions, self.relations], dim=1)

    @property
    def edge_weight(self) -> Tensor:
        """``[M + R]``: the mentions' weights, then 1 for every relation edge."""
        return torch.cat([self.mention_weight, torch.ones(self.relations.size(1))])


#: An entity that more than this share of the passages mention is boilerplate (a footer, a site's
#: name): no node. Above it a mention's :func:`specificity` is at most ``(log 2 / log N) ** idf_power``,
#: ~0 already, while the entity's node would cost φ and bridging the square of its passages in
#: 2-paths. No entity of the shared benchmark corpora comes near it (at most 20% of the passages).
MAX_SHARE = 0.5
#: ... and that at least this many passages mention: below it the node costs little, and in a
#: corpus that small an entity of most passages may well be its topic.
BOILERPLATE_MIN_PASSAGES = 50
#: Boilerplate entities named in the graph's record and the warning, most frequent first.
BOILERPLATE_SHOWN = 5

#: A mention's smallest weight (an entity every passage mentions), so that no edge weighs 0.
MIN_MENTION_WEIGHT = 1e-3


def specificity(df: Tensor, num_passages: int, idf_power: float) -> Tensor:
    """A mention's weight from its entity's document frequency ``df``: the entity's idf
    relative to the largest possible, ``(log(N / df) / log N) ** idf_power`` (at least
    :data:`MIN_MENTION_WEIGHT`; 1 for every mention when ``idf_power`` is 0). At most 1, the
    weight of an edge from a builder without weights, so that a specific entity ties two passages
    about as strongly as a title mention, while a random walk leaves a passage mostly through its
    specific entities rather than through generic hubs ("american", "2007")."""
    if isinstance(idf_power, bool) or not isinstance(idf_power, (int, float)) or not idf_power >= 0:  # NaN included
        raise ValueError(f"idf_power must be a number >= 0, got {idf_power!r}")
    if idf_power == 0 or num_passages < 2:
        return torch.ones(df.numel())
    relative = torch.log(num_passages / df.double()) / math.log(num_passages)  # in [0, 1]: 1 <= df <= N
    return relative.clamp_min(MIN_MENTION_WEIGHT).pow(idf_power).clamp_min(MIN_MENTION_WEIGHT).float()


def entity_graph_from_extraction(extraction: Extraction, num_passages: int, min_passages: int = 2,
                                 max_passages: int | None = None, idf_power: float = 2.0, max_share: float = MAX_SHARE) -> EntityGraph:
    """Entity nodes for the normalised strings of ``extraction`` (near-duplicates merged) that
    at least ``min_passages`` passages mention (an entity of one passage links nothing) and, when
    ``max_passages`` is set, at most that many (default: no cap — generic entities stay as hubs,
    which is what the isoperimetric filter is for); mention edges, weighted by the entity's
    :func:`specificity` with ``idf_power``; relation edges between two kept entities of a triple;
    and, when ``min_passages > 1``, the entities only one passage mentions (``unique_mentions``:
    no node, since they link nothing, but a question that names one points at that passage).

    Boilerplate, an entity that more than ``max_share`` of the passages (in ``(0, 1]``; 1: none)
    and at least :data:`BOILERPLATE_MIN_PASSAGES` mention, gets no node either: it is listed
    with its passages in ``boilerplate``, most frequent first."""
    if len(extraction.entities) != num_passages:
        raise ValueError(f"the extraction covers {len(extraction.entities)} passages, the corpus has {num_passages}")
    if min_passages < 1 or (max_passages is not None and max_passages < min_passages):
        raise ValueError(f"need 1 <= min_passages <= max_passages, got {min_passages}, {max_passages}")
    if isinstance(max_share, bool) or not isinstance(max_share, (int, float)) or not 0 < max_share <= 1:  # NaN included
        raise ValueError(f"max_share must be a share of the passages in (0, 1], got {max_share!r}")
    block: dict[str, str] = {}  # near-duplicate blocking key -> the first key seen
    memo: dict[str, str] = {}  # raw string -> its key (raw strings repeat across passages)
    surface: dict[str, Counter] = {}
    mentioned: dict[str, set[int]] = {}

    def key_of(raw: str) -> str:
        key = memo.get(raw)
        if key is None:
            normal = normalize_entity(raw)
            key = memo[raw] = block.setdefault(near_duplicate_key(normal), normal) if normal else ""
        return key

    for row, names in enumerate(extraction.entities):
        for raw in names:
            if key := key_of(raw):
                mentioned.setdefault(key, set()).add(row)
                surface.setdefault(key, Counter())[raw.strip()] += 1
    common = {key for key, rows in mentioned.items() if len(rows) > max_share * num_passages and len(rows) >= BOILERPLATE_MIN_PASSAGES}
    kept = [key for key, rows in mentioned.items()
            if len(rows) >= min_passages and (max_passages is None or len(rows) <= max_passages) and key not in common]
    node = {key: num_passages + i for i, key in enumerate(kept)}
    df = torch.tensor([len(mentioned[key]) for key in kept], dtype=torch.long)  # each kept entity's passages
    rows = torch.tensor([row for key in kept for row in mentioned[key]], dtype=torch.long)
    cols = torch.repeat_interleave(torch.arange(num_passages, num_passages + len(kept)), df)
    order = torch.argsort(rows * (num_passages + len(kept)) + cols)  # by passage, then entity
    mentions = torch.stack([rows[order], cols[order]])
    relation_pairs = set()
    for triples in extraction.triples:
        for subject, _, obj in triples:
            u, v = node.get(key_of(subject)), node.get(key_of(obj))
            if u is not None and v is not None and u != v:
                relation_pairs.add((min(u, v), max(u, v)))
    relations = torch.tensor(sorted(relation_pairs), dtype=torch.long).t().reshape(2, -1)
    names = [surface[key].most_common(1)[0][0] for key in kept]
    linked = torch.zeros(num_passages, dtype=torch.bool)
    linked[mentions[0]] = True
    weight = specificity(df, num_passages, idf_power)[mentions[1] - num_passages]
    unique = {near_duplicate_key(key): next(iter(rows)) for key, rows in mentioned.items() if len(rows) == 1} if min_passages > 1 else {}
    boilerplate = {surface[key].most_common(1)[0][0]: len(mentioned[key]) for key in sorted(common, key=lambda key: (-len(mentioned[key]), key))}
    return EntityGraph(names, mentions, relations, int((~linked).sum()), weight, dict(extraction.ungrounded), unique, boilerplate)


def entity_graph(texts: Sequence[str], extractor: str = "rules", extractor_args: Mapping[str, Any] | None = None,
                 min_passages: int = 2, max_passages: int | None = None, idf_power: float = 2.0,
                 max_share: float = MAX_SHARE) -> EntityGraph:
    """Extract entities (and triples) from ``texts`` with the named extractor of
    :data:`EXTRACTORS` and build the entity graph over them (mentions weighted by
    :func:`specificity` with ``idf_power``; entities of more than ``max_share`` of the passages,
    default :data:`MAX_SHARE`, and of at least :data:`BOILERPLATE_MIN_PASSAGES`, are boilerplate:
    no node, one warning naming the most frequent; ``max_share=1`` keeps them all;
    :func:`entity_graph_from_extraction`)."""
    make_extractor = EXTRACTORS[extractor]  # an unknown name fails here, before any work
    blank = [i for i, text in enumerate(texts) if not text.strip()]
    if blank:
        log.warning("entity graph: %d passages are empty or whitespace (first: row %d); they get no entity edge", len(blank), blank[0])
    graph = entity_graph_from_extraction(make_extractor(**dict(extractor_args or {})).extract(texts), len(texts),
                                         min_passages, max_passages, idf_power, max_share)
    if graph.boilerplate:
        shown = ", ".join(f"{name!r} ({count})" for name, count in list(graph.boilerplate.items())[:BOILERPLATE_SHOWN])
        log.warning("entity graph: %d entities that more than %.0f%% of the %d passages mention are boilerplate and get no node "
                    "(their links carry no information): %s%s", len(graph.boilerplate), 100 * max_share, len(texts), shown,
                    ", ..." if len(graph.boilerplate) > BOILERPLATE_SHOWN else "")
    if graph.passages_without_entities:
        log.info("entity graph: %d of %d passages share no entity with another passage", graph.passages_without_entities, len(texts))
    return graph


def entity_embeddings(x: Tensor, mentions: Tensor, num_entities: int) -> Tensor:
    """Every entity node's vector: the normalised mean of the embeddings of the passages that
    mention it (so the dense score of an entity is the query's similarity to its passages)."""
    num_passages = x.size(0)
    sums = torch.zeros(num_entities, x.size(1), dtype=torch.float32)
    sums.index_add_(0, mentions[1] - num_passages, x[mentions[0]].float())
    return torch.nn.functional.normalize(sums, dim=-1)


def num_passage_nodes(data: Any) -> int:
    """The passages among a graph's nodes (rows ``0..N-1``): all of them unless it has entity nodes."""
    return int(getattr(data, "num_passages", None) or data.num_nodes)


def with_entity_nodes(x: Tensor, edge_index: Tensor, num_entities: int) -> Tensor:
    """The passages' rows ``x`` followed by the vectors of ``num_entities`` entity nodes (the rows
    after the passages in ``edge_index``): :func:`entity_embeddings` of the passages linked to
    them. ``x`` itself when there are none."""
    if not num_entities:
        return x
    num_passages = x.size(0)
    mentions = edge_index[:, (edge_index[0] < num_passages) & (edge_index[1] >= num_passages)]
    return torch.cat([x.float(), entity_embeddings(x, mentions, num_entities)])
