"""The default graph: builders chosen by what a corpus supports, so an index is never a graph
without edges; and the graph's statistics in words, with a warning when most passages are isolated."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph.builders import chunk_position, title_mention
from isorag_pyg.graph.query_entities import query_extractor
from isorag_pyg.graph.text import has_code_span

log = logging.getLogger(__name__)

#: Above this share of isolated passages the graph barely helps: a warning says so.
ISOLATED_WARNING_SHARE = 0.5

#: Title mentions carry the graph alone when their edges touch at least this share of the
#: passages; below it the entity graph is added. Chosen on training questions with 0-100% of
#: their titles kept (the project's benchmark docs, corpora without titles).
TITLE_SHARE_THRESHOLD = 0.79

#: The entity graph's extractor reads Markdown code spans as identifiers when at least this share
#: of the passages write one: technical documentation (this repository's docs: 64%), not prose
#: (the shared datasets: none), nor a prose corpus some injected passages wrote code into (8 of
#: 1,200 passages are 0.7%); decided once, when the index is built.
CODE_SPAN_SHARE_THRESHOLD = 0.05


def title_mention_share(corpus: list[Passage]) -> float:
    """The share of passages that the ``title_mention`` builder's edges touch (either end)."""
    edges = title_mention(corpus)
    return torch.unique(edges).numel() / len(corpus) if corpus and edges.numel() else 0.0


def chunked_documents(corpus: list[Passage]) -> bool:
    """Some document was split into several chunks ``path#n`` (the folder reader's ids)."""
    documents = [position[0] for p in corpus if (position := chunk_position(p.id)) is not None]
    return len(set(documents)) < len(documents)


def code_span_share(corpus: list[Passage]) -> float:
    """The share of passages whose text writes an identifier as a Markdown code span."""
    return sum(has_code_span(p.text) for p in corpus) / len(corpus) if corpus else 0.0


def auto_graph(corpus: list[Passage]) -> dict[str, dict[str, Any]]:
    """Builder name -> arguments for ``corpus``: ``title_mention`` where titles occur in other
    passages' text, ``entity_graph`` (LLM-free rule extractor) unless title mentions touch at
    least :data:`TITLE_SHARE_THRESHOLD` of the passages (its extractor reading code spans where
    at least :data:`CODE_SPAN_SHARE_THRESHOLD` of the passages write one), ``adjacent`` where
    documents were chunked."""
    spec: dict[str, dict[str, Any]] = {}
    share = title_mention_share(corpus)
    if share > 0:
        spec["title_mention"] = {}
    if share < TITLE_SHARE_THRESHOLD:
        spec["entity_graph"] = {"extractor_args": {"code_spans": True}} if code_span_share(corpus) >= CODE_SPAN_SHARE_THRESHOLD else {}
    if chunked_documents(corpus):
        spec["adjacent"] = {}
    code = " (code spans read as identifiers)" if spec.get("entity_graph") else ""
    log.info("graph builders chosen for this corpus (title mentions touch %.0f%% of the passages): %s%s", 100 * share, ", ".join(spec), code)
    return spec


#: Retriever knobs an index stores when its graph has entity nodes (chosen on training questions
#: with blank titles, together with the builder's ``idf_power`` 2: the project's benchmark docs):
#: with passage seeds, a passage reaches the passages that share an entity with it in two hops;
#: the walks follow the mention weights (specific entities over generic hubs); the hub cap keeps
#: 400 nodes per hop (two hops through hubs reach many passages); the filter's ``beta`` is 0.05,
#: at which it prunes almost nothing there; the teleport is sharper (``tau`` 20) and the fusion
#: gives the dense score more weight (0.2).
ENTITY_GRAPH_KNOBS: dict[str, dict[str, Any]] = {
    "iso": {"hops": 2, "edge_weights": True, "max_expansion": 400, "beta": 0.05, "tau": 20.0, "lambda_graph": 0.8, "lambda_dense": 0.2},
    "ppr": {"edge_weights": True},
}


#: ... and when it has title mentions: a bridge that a question's seed names by its title is
#: walked for that question, so the cut costs less and takes a larger share of the passages (the
#: largest whose clean cost stays within a point of no cut on the poisoning benchmark's training
#: cuts, titles kept).
TITLE_MENTION_KNOBS: dict[str, dict[str, Any]] = {"iso": {"bridge_share": 0.04}}


#: ... and when its entity graph reads code spans (documentation that writes code): ISO-RAG's
#: ranking is a hybrid with BM25 (``lexical_weight``), whose exact words find the rows that name
#: identifiers the default encoder reads as noise. Chosen on training questions about the
#: project's own docs (the project's benchmark docs). Prose corpora keep it off: BM25 is the
#: retriever an attacker's words steer most (the poisoning benchmark).
CODE_SPAN_KNOBS: dict[str, dict[str, Any]] = {"iso": {"lexical_weight": 1.0}}


def reads_code_spans(spec: Mapping[str, Any]) -> bool:
    """Whether graph ``spec``'s entity graph reads Markdown code spans as identifiers (its rules
    extractor, :func:`~isorag_pyg.graph.query_entities.query_extractor`, is told to)."""
    return "entity_graph" in spec and query_extractor(spec).code_spans


def graph_knobs(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The retriever knobs an index with graph ``spec`` starts with (:data:`ENTITY_GRAPH_KNOBS`
    when it has an entity graph, :data:`TITLE_MENTION_KNOBS` when it has title mentions,
    :data:`CODE_SPAN_KNOBS` when its entity graph reads code spans; else none: the retrievers'
    defaults)."""
    knobs: dict[str, dict[str, Any]] = {}
    chosen = [stored for builder, stored in (("entity_graph", ENTITY_GRAPH_KNOBS), ("title_mention", TITLE_MENTION_KNOBS))
              if builder in spec]
    for stored in chosen + ([CODE_SPAN_KNOBS] if reads_code_spans(spec) else []):
        for name, values in stored.items():
            knobs[name] = {**knobs.get(name, {}), **values}
    return knobs


def describe_graph(statistics: Mapping[str, Any]) -> list[str]:
    """The graph's statistics in a few lines: nodes, edges, isolated passages, the largest hubs by
    name, the entity graph's boilerplate entities (left out), and a warning (a line starting
    ``warning:``) when most passages are isolated."""
    passages = statistics.get("passages", statistics.get("nodes", 0))
    entities = statistics.get("entities", 0)
    share = float(statistics.get("isolated_passage_share", 0.0))
    lines = [
        f"graph ({'+'.join(statistics.get('builders', []))}): {passages} passages"
        + (f" + {entities} entity nodes" if entities else "")
        + f", {statistics.get('edges', 0)} edges, {share:.1%} of passages isolated",
    ]
    if hubs := statistics.get("largest_hubs"):
        lines.append("largest hubs: " + ", ".join(f"{name} ({degree})" for name, degree in hubs))
    if boilerplate := statistics.get("entity_graph_boilerplate_entities"):
        top = statistics.get("entity_graph_boilerplate_top", [])
        shown = ", ".join(f"{name} ({count})" for name, count in top) + (", ..." if boilerplate > len(top) else "")
        lines.append(f"boilerplate: {boilerplate} entities that most passages mention get no node: {shown}")
    if share > ISOLATED_WARNING_SHARE:
        hint = ("the passages share few entities: longer passages, or another extractor, may link more"
                if "entity_graph" in statistics.get("builders", []) else "use a graph with more edges (e.g. entity_graph)")
        lines.append(f"warning: {share:.0%} of passages have no edge, so graph retrieval is mostly dense retrieval here; {hint}")
    return lines
