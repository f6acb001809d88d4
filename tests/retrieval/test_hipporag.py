"""HippoRAG 2's walk as a baseline: checked against igraph's personalized PageRank (the one HippoRAG
uses), its teleport weights, its entity cap and its dense fallback."""
from __future__ import annotations

import igraph as ig
import pytest
import torch
from conftest import DEVICES
from entity_corpus import entity_index

from isorag_pyg.knobs import HippoRAGKnobs
from isorag_pyg.retrieval import HippoRAGRetriever, Queries, RetrievalGraph


def world(num_passages=12, num_entities=5, seed=0):
    """Passages, entity nodes after them, mention edges (both ways), unit embeddings."""
    gen = torch.Generator().manual_seed(seed)
    mentions = [(p, num_passages + e) for p in range(num_passages) for e in range(num_entities) if torch.rand(1, generator=gen) < 0.35]
    edges = torch.tensor(mentions).t()
    edge_index = torch.cat([edges, edges.flip(0)], 1)
    x = torch.nn.functional.normalize(torch.randn(num_passages + num_entities, 8, generator=gen), dim=-1)
    weight = torch.rand(edge_index.size(1) // 2, generator=gen).repeat(2) + 0.1
    return edge_index, x, weight


def reference(edge_index, x, weight, query, seeds, knobs, num_passages):
    """HippoRAG 2's recipe written out with igraph: reset = entity weights 1/passages + passage weights
    minmax(cosine) * passage_node_weight; damping alpha; passages ranked by PPR."""
    n = x.size(0)
    cosine = x[:num_passages] @ query
    dense = (cosine - cosine.min()) / (cosine.max() - cosine.min())
    reset = [0.0] * n
    for p in range(num_passages):
        reset[p] = float(dense[p]) * knobs.passage_node_weight
    passages_of = {e: int(((edge_index[0] < num_passages) & (edge_index[1] == e)).sum()) for e in seeds}
    for e in seeds:
        reset[e] += 1.0 / passages_of[e]
    g = ig.Graph(n=n, edges=edge_index.t().tolist(), directed=True)
    pr = g.personalized_pagerank(damping=knobs.alpha, reset=reset, weights=weight.tolist() if knobs.edge_weights else None, directed=True)
    return sorted(range(num_passages), key=lambda p: -pr[p])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("edge_weights", [False, True])
def test_the_walk_equals_hipporag_2_written_with_igraph(device, edge_weights):
    num_passages = 12
    edge_index, x, weight = world(num_passages)
    knobs = HippoRAGKnobs(edge_weights=edge_weights, tol=1e-10, max_iter=1000)
    graph = RetrievalGraph(edge_index, x, device, edge_weight=weight, num_passages=num_passages)
    named = [[12, 14], [13], [15, 16, 12]]
    retriever = HippoRAGRetriever(graph, knobs, entity_matcher=lambda questions: named[: len(questions)])
    queries = torch.nn.functional.normalize(torch.randn(3, 8, generator=torch.Generator().manual_seed(1)), dim=-1)
    result = retriever.retrieve(Queries(["a", "b", "c"], queries), k=num_passages)
    for q in range(3):
        assert result.indices[q].tolist() == reference(edge_index, x, weight, queries[q], named[q], knobs, num_passages)


def test_entity_seeds_weigh_by_their_passages_and_are_capped():
    edge_index, x, weight = world()
    graph = RetrievalGraph(edge_index, x, edge_weight=weight, num_passages=12)
    retriever = HippoRAGRetriever(graph, HippoRAGKnobs(linking_top_k=2), entity_matcher=lambda qs: [[3, 12, 13, 14]] * len(qs))
    weights = retriever.seed_weights(["q"])[0]
    assert 3 in weights and weights[3] == 1.0  # a passage seeded for an entity only it mentions
    assert len(weights) == 2  # the heaviest two


def test_a_question_naming_no_entity_is_answered_by_dense_retrieval():
    edge_index, x, weight = world()
    graph = RetrievalGraph(edge_index, x, edge_weight=weight, num_passages=12)
    query = torch.nn.functional.normalize(torch.randn(1, 8), dim=-1)
    found = HippoRAGRetriever(graph, entity_matcher=lambda qs: [[]]).retrieve(Queries(["q"], query), k=5)
    assert found.indices[0].tolist() == (x[:12] @ query[0]).topk(5).indices.tolist()
    assert HippoRAGRetriever(graph).retrieve(Queries(["q"], query), k=5).indices.tolist() == found.indices.tolist()  # no matcher: the same


def test_the_index_serves_hipporag_from_its_own_graph():
    index = entity_index()
    hits = index.retrieve(["Who directed Velmora?"], k=2, retriever="hipporag")[0]
    assert hits[0].text.startswith("Velmora is a film")
    assert index.retriever("hipporag", alpha=0.7).knobs.alpha == 0.7
    with pytest.raises(ValueError, match="alpha"):
        index.retriever("hipporag", alpha=1.5)
