"""The corpus as a PyG :class:`~torch_geometric.data.Data` graph, and its statistics."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, degree, remove_self_loops, to_undirected

from isorag_pyg.datasets.types import Passage, QADataset
from isorag_pyg.graph import builders
from isorag_pyg.graph.builders import DIRECTED_BUILDERS
from isorag_pyg.graph.entity_graph import entity_graph, with_entity_nodes
from isorag_pyg.graph.noise import noise_edges
from isorag_pyg.graph.query_entities import query_extractor
from isorag_pyg.graph.text import title_cased

log = logging.getLogger(__name__)

#: Builders whose edges come from the evaluated questions themselves.
LEAKY_BUILDERS = frozenset({"context_cooccurrence"})
#: The builders' output format: raised whenever a builder's edges change for the same arguments
#: and corpus (cached indexes key on it, so that none built by older builder code is reused).
BUILDERS_VERSION = 5
BUILDER_NAMES = ("context_cooccurrence", "train_cooccurrence", "title_mention", "knn", "entity_comention", "entity_graph", "adjacent",
                 "noise")

#: A builder's output: directed pairs, or pairs and their weights (a weighted builder).
BuilderEdges = Tensor | tuple[Tensor, Tensor]


class GraphEdges(dict):
    """Builder name -> edges (what :func:`run_builders` returns), plus ``records``: builder name ->
    what it did beyond its edges (the noise builder's resolved counts and seed), which
    :func:`build_corpus_graph` keeps on the graph and :func:`graph_statistics` reports; and
    ``entity_names``: the entity nodes the ``entity_graph`` builder appended after the passages
    (node ``N + i`` is ``entity_names[i]``); ``unique_mentions``: its entities that only one
    passage mentions (entity key -> passage row)."""

    def __init__(self, *args: Any, records: Mapping[str, Mapping[str, Any]] | None = None,
                 entity_names: list[str] | None = None, unique_mentions: Mapping[str, int] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.records: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (records or {}).items()}
        self.entity_names: list[str] = list(entity_names or [])
        self.unique_mentions: dict[str, int] = dict(unique_mentions or {})


def _edge_index_of(edges: BuilderEdges) -> Tensor:
    return edges[0] if isinstance(edges, tuple) else edges


def clean_undirected_edge_count(edges: Mapping[str, BuilderEdges], num_nodes: int) -> int:
    """Undirected, self-loop-free, distinct edges in the union of the builders' edges."""
    parts = [_edge_index_of(e) for e in edges.values()]
    if not parts or not sum(p.size(1) for p in parts):
        return 0
    ei, _ = remove_self_loops(to_undirected(torch.cat(parts, dim=1), num_nodes=num_nodes))
    return ei.size(1) // 2


def entity_texts(corpus: Sequence[Passage], titles: bool = True, title_cased_too: bool = True, code_spans: bool = False) -> list[str]:
    """What the entity graph's extractor reads of each passage: its text, after its title when
    ``titles`` (a passage names its own subject in its title, often only there: without it, a
    question naming that subject would match only the other passages that mention it), and, when
    ``title_cased_too`` (the rule extractor, which finds names by their capitals), after the title
    again with every word capitalised where that differs (:func:`title_cased`: a question may
    capitalise "Lady For A Day", and the passage about it must carry that name, not only an
    injected one that copies the question's spelling; code spans kept as written with ``code_spans``).

        >>> entity_texts([Passage("0", "Clement Gibson", "He was a rugby player."), Passage("1", "", "No title.")])
        ['Clement Gibson. He was a rugby player.', 'No title.']
        >>> entity_texts([Passage("0", "Is it?", "Yes."), Passage("1", "Lady for a Day", "A film.")])
        ['Is it? Is It? Yes.', 'Lady for a Day. Lady For A Day. A film.']
        >>> entity_texts([Passage("1", "Lady for a Day", "A film.")], title_cased_too=False)
        ['Lady for a Day. A film.']
    """
    if not isinstance(titles, bool):
        raise TypeError(f"the entity_graph builder's titles must be true or false, got {titles!r}")
    if not titles:
        return [p.text for p in corpus]
    return [f"{_titles_read(title, title_cased_too, code_spans)} {p.text}" if (title := p.title.strip()) else p.text for p in corpus]


def _sentence(text: str) -> str:
    return f"{text}{'' if text[-1] in '.!?' else '.'}"


def _titles_read(title: str, title_cased_too: bool, code_spans: bool) -> str:
    """A passage's title as the extractor reads it before its text: as written, then title-cased when asked and different."""
    cased = title_cased(title, code_spans) if title_cased_too else title
    return _sentence(title) if cased == title else f"{_sentence(title)} {_sentence(cased)}"


class EmptyGraphError(ValueError):
    """The builders produced no edge, so there is nothing to train f_θ on."""


def run_builders(
    spec: Mapping[str, Mapping[str, Any] | None],
    corpus: list[Passage],
    x: torch.Tensor,
    eval_questions: QADataset | None = None,
    train_questions: QADataset | None = None,
) -> GraphEdges:
    """Run each named builder in ``spec`` (name -> keyword arguments) and return its edges.

    ``noise`` runs last, whatever its place in ``spec``: it adds seeded hub and random shortcut
    edges to the other builders' graph (:func:`~isorag_pyg.graph.noise.noise_edges`, whose
    ``random_ratio`` counts the clean edges), and its resolved parameters are recorded.
    """
    edges = GraphEdges()
    for name, kwargs in spec.items():
        kwargs = dict(kwargs or {})
        if name == "context_cooccurrence":
            if eval_questions is None:
                raise ValueError("context_cooccurrence needs the evaluation questions")
            edges[name] = builders.context_cooccurrence(corpus, eval_questions)
            log.warning("graph builder context_cooccurrence uses the evaluated questions' contexts: this is a LEAK")
        elif name == "train_cooccurrence":
            if train_questions is None:
                raise ValueError("train_cooccurrence needs training questions (dataset.train_questions)")
            edges[name], found = builders.train_cooccurrence(corpus, train_questions)
            log.info("train_cooccurrence: %d training context passages found in the corpus", found)
        elif name == "title_mention":
            edges[name] = builders.title_mention(corpus, **kwargs)
        elif name == "knn":
            edges[name] = builders.knn(x, **kwargs)
        elif name == "entity_comention":
            edges[name] = builders.entity_comention(corpus, **kwargs)
        elif name == "entity_graph":
            rules = kwargs.get("extractor", "rules") == "rules"  # an LLM reads a name whatever its capitals
            code_spans = query_extractor({name: kwargs}).code_spans  # the rules extractor told to read them
            graph = entity_graph(entity_texts(corpus, kwargs.pop("titles", True), title_cased_too=rules, code_spans=code_spans), **kwargs)
            edges[name], edges.entity_names, edges.unique_mentions = (graph.edge_index, graph.edge_weight), graph.names, graph.unique_mentions
            edges.records[name] = graph.record
        elif name == "adjacent":
            edges[name] = builders.adjacent(corpus)
        elif name == "noise":
            continue
        else:
            raise ValueError(f"unknown graph builder {name!r}; choose from {', '.join(BUILDER_NAMES)}")
    if "noise" in spec:
        clean = clean_undirected_edge_count(edges, len(corpus))
        edges["noise"], record = noise_edges(len(corpus), clean, **dict(spec["noise"] or {}))
        edges.records["noise"] = record
        log.info("noise builder added %s", record)
    return edges


def build_corpus_graph(corpus: list[Passage], x: torch.Tensor, edges: Mapping[str, BuilderEdges]) -> Data:
    """Merge builder edges into one undirected, coalesced, self-loop-free graph.

    ``edge_weight`` sums, over the builders that produced an edge, that builder's weight for it
    (``1`` for an unweighted builder, so on unweighted builders it counts them; each direction
    counted once); ``edge_source`` is a bitmask over ``data.builders`` (bit ``i`` for builder
    ``i``); ``edge_backlink`` marks the edges that only a :data:`~isorag_pyg.graph.builders.DIRECTED_BUILDERS` builder made,
    and only in the other direction (the passage whose title is mentioned -> the mentioning one). ``edges`` values are ``[2, E]`` pairs or ``(pairs, [E] weights)``; the ``records`` of
    a :class:`GraphEdges` are kept as ``data.builder_records``.

    Entity nodes (``edges.entity_names``) follow the passages as rows ``N..N+E-1``: their ``x``
    is the mean of their passages' (:func:`~isorag_pyg.graph.entity_graph.entity_embeddings`),
    ``data.node_type`` is 0 for passages and 1 for entities, ``data.num_passages`` is ``N``.
    """
    num_passages = len(corpus)
    if num_passages == 0:
        raise ValueError("cannot build a graph over an empty corpus")
    if x.dim() != 2 or x.size(0) != num_passages:
        raise ValueError(f"x must be [num_passages={num_passages}, dim], got {tuple(x.shape)}")
    entity_names = list(getattr(edges, "entity_names", []))
    n = num_passages + len(entity_names)
    names = list(edges)
    parts, masks, weights, along = [], [], [], []
    for bit, name in enumerate(names):
        ei = _edge_index_of(edges[name])
        w = edges[name][1].float() if isinstance(edges[name], tuple) else torch.ones(ei.size(1))
        if w.numel() != ei.size(1) or (w.numel() and not (torch.isfinite(w).all() and (w >= 0).all())):
            raise ValueError(f"builder {name!r} gave {w.numel()} weights for {ei.size(1)} edges, or weights that are negative or not finite")
        if ei.numel() and (ei.min() < 0 or ei.max() >= n):
            raise ValueError(f"builder {name!r} produced node ids outside [0, {n})")
        made = ei[0] * n + ei[1]
        ei, w = to_undirected(ei, w, num_nodes=n, reduce="max")
        ei, w = remove_self_loops(ei, w)
        parts.append(ei)
        weights.append(w)
        masks.append(torch.full((ei.size(1),), 1 << bit, dtype=torch.long))
        along.append(torch.isin(ei[0] * n + ei[1], made).long() if name in DIRECTED_BUILDERS else torch.ones(ei.size(1), dtype=torch.long))
    edge_index = torch.cat(parts, dim=1) if parts else torch.empty(2, 0, dtype=torch.long)
    source = torch.cat(masks) if masks else torch.empty(0, dtype=torch.long)
    weight = torch.cat(weights) if weights else torch.empty(0)
    forward = torch.cat(along) if along else torch.empty(0, dtype=torch.long)
    edge_index, (weight, source, forward) = coalesce(edge_index, [weight, source, forward], num_nodes=n, reduce="sum")
    leak = any(name in LEAKY_BUILDERS for name in names)
    x = with_entity_nodes(x, edge_index, len(entity_names))
    data = Data(x=x, edge_index=edge_index, edge_weight=weight, edge_source=source, num_nodes=n)
    data.edge_backlink = forward == 0
    data.node_type = (torch.arange(n) >= num_passages).long()
    data.num_passages = num_passages
    data.entity_names = entity_names
    data.unique_mentions = dict(getattr(edges, "unique_mentions", {}))
    data.passage_id = [p.id for p in corpus]
    data.builders = names
    data.leak = leak
    data.builder_records = dict(getattr(edges, "records", {}))
    return data


def graph_statistics(data: Data) -> dict[str, Any]:
    """Nodes, undirected edges, isolated nodes, degree percentiles, share of edges per builder, and
    each builder's record (``noise_hubs``, ``noise_hub_degree``, ``noise_random_edges``, ``noise_seed``, ...)."""
    n = data.num_nodes
    deg = degree(data.edge_index[0], n) if data.edge_index.numel() else torch.zeros(n)
    num_directed = data.edge_index.size(1)
    stats: dict[str, Any] = {
        "nodes": n,
        "edges": num_directed // 2,
        "isolated_nodes": int((deg == 0).sum()),
        "leak": bool(getattr(data, "leak", False)),
    }
    for q in (50, 90, 99):
        stats[f"degree_p{q}"] = float(torch.quantile(deg.float(), q / 100)) if n else 0.0
    stats["degree_max"] = float(deg.max()) if n else 0.0
    for bit, name in enumerate(getattr(data, "builders", [])):
        has = ((data.edge_source >> bit) & 1).bool()
        stats[f"edge_share_{name}"] = float(has.float().mean()) if num_directed else 0.0
    for name, record in getattr(data, "builder_records", {}).items():
        stats.update({f"{name}_{key}": value for key, value in record.items()})
    num_passages = int(getattr(data, "num_passages", n) or n)
    stats["passages"], stats["entities"] = num_passages, n - num_passages
    stats["isolated_passage_share"] = float((deg[:num_passages] == 0).float().mean()) if num_passages else 0.0
    stats["largest_hubs"] = largest_hubs(data, deg)
    stats["builders_version"] = BUILDERS_VERSION
    return stats


def node_names(data: Data, passage_ids: Sequence[str] | None = None) -> list[str]:
    """Every node's name: a passage's id (``passage_ids``, else the graph's own ``passage_id``,
    else its row), an entity node's name."""
    if passage_ids is None:
        passage_ids = getattr(data, "passage_id", None) or [str(i) for i in range(int(getattr(data, "num_passages", data.num_nodes)))]
    return [*passage_ids, *getattr(data, "entity_names", [])]


def named_edge_difference(old: Data, new: Data, old_ids: Sequence[str], new_ids: Sequence[str]) -> tuple[int, int]:
    """Undirected edges of ``new`` not in ``old`` and of ``old`` not in ``new``, matched by node
    names (passage id, entity name; ``old_ids`` / ``new_ids`` name each graph's passage rows, which
    a graph loaded from disk does not carry): an update renumbers entity nodes."""
    old_keys, new_keys = _named_edges(old, old_ids), _named_edges(new, new_ids)
    return len(new_keys - old_keys), len(old_keys - new_keys)


def _named_edges(data: Data, passage_ids: Sequence[str]) -> set[tuple[tuple[bool, str], tuple[bool, str]]]:
    """A graph's undirected edges as pairs of (is an entity node, name)."""
    num_passages = int(getattr(data, "num_passages", data.num_nodes) or data.num_nodes)
    names = [(i >= num_passages, name) for i, name in enumerate(node_names(data, passage_ids))]
    src, dst = data.edge_index
    once = src < dst
    return {(names[u], names[v]) for u, v in zip(src[once].tolist(), dst[once].tolist())}


def largest_hubs(data: Data, deg: Tensor, count: int = 5) -> list[list[Any]]:
    """The ``count`` nodes of highest degree, as ``[name, degree]``."""
    if not data.num_nodes or not int(deg.max()):
        return []
    names = node_names(data)
    top = deg.topk(min(count, data.num_nodes))
    return [[names[i], int(d)] for i, d in zip(top.indices.tolist(), top.values.tolist()) if d > 0]
