"""ISO-RAG's hybrid with BM25 (``lexical_weight``): the fused ranking, its reference, where an
index turns it on, and its refusals."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import to_undirected

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph.auto import CODE_SPAN_KNOBS, graph_knobs
from isorag_pyg.index.results import explained
from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.retrieval import BM25Retriever, ISORetriever, Queries
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.utils.rank_fusion import minmax_union

WORDS = ["river", "castle", "harbour", "meadow", "orchard", "quarry", "glacier", "canyon", "lagoon", "prairie"]


def world(n=30, d=8, seed=0):
    """Passages of two topic words each (passage 7 alone writes "zephyrine"), random vectors and
    edges, and two questions whose vectors are the far side of passage 7's."""
    gen = torch.Generator().manual_seed(seed)
    texts = [f"{WORDS[i % 10]} {WORDS[(3 * i + 1) % 10]} note {i}" for i in range(n)]
    texts[7] += " zephyrine"
    x = torch.nn.functional.normalize(torch.randn(n, d, generator=gen), dim=-1)
    edges = torch.randint(0, n, (2, 60), generator=gen)
    graph = RetrievalGraph(to_undirected(edges[:, edges[0] != edges[1]], num_nodes=n), x)
    queries = Queries(["Which note is zephyrine?", "Which river is zephyrine?"], torch.stack([-x[7], -x[7]]))
    return texts, graph, queries


def test_the_hybrid_ranks_the_union_of_the_walks_and_bm25s_best_by_their_scaled_scores():
    texts, graph, queries = world(n=200)
    bm25 = BM25Retriever(texts)
    log_phi = torch.zeros(graph.num_nodes, dtype=torch.float64)
    walk = ISORetriever(graph, log_phi, ISOKnobs(near_duplicate_cosine=2.0))
    hybrid = ISORetriever(graph, log_phi, ISOKnobs(near_duplicate_cosine=2.0, lexical_weight=1.0), lexical=bm25)
    k = 3
    _, depth, _ = walk.sizes(k)
    walked, lexical = walk._retrieve_chunk(queries, k, False, depth), bm25.retrieve(queries, depth)  # the walk's L best of its k's pool
    got = hybrid.retrieve(queries, k, trace=True)
    assert 7 not in walk.retrieve(queries, k).indices[0].tolist()  # the walk alone misses the one passage with the question's rare word
    for q in range(len(queries)):
        expected: dict[int, float] = {}
        for rows, scores, weight in ((walked.indices[q], walked.scores[q], 1.0), (lexical.indices[q], lexical.scores[q], 1.0)):
            low, high = float(scores.min()), float(scores.max())
            for row, score in zip(rows.tolist(), scores.tolist()):
                expected[row] = expected.get(row, 0.0) + weight * (score - low) / (high - low)
        best = sorted(expected.items(), key=lambda item: -item[1])[:k]
        assert got.scores[q].tolist() == pytest.approx([score for _, score in best], abs=1e-6)
        assert [expected[row] for row in got.indices[q].tolist()] == pytest.approx(got.scores[q].tolist(), abs=1e-6)  # ties in any order
        assert 7 in got.indices[q].tolist()  # BM25 brings it in
        assert got.traces[q]["top"] == list(zip(got.indices[q].tolist(), got.scores[q].tolist()))  # explain shows this ranking
        assert 7 not in got.traces[q]["candidates"]  # BM25's passage is none of the walk's local graph ...
        shown = explained(got.traces[q], [Passage(f"p{i}", "", t) for i, t in enumerate(texts)], queries.texts[q])
        assert "p7" in [p["id"] for p in shown["top"]] and "p7" not in shown["titles"]  # ... and explain shows it all the same


def test_no_weight_is_the_walk_alone_and_bad_weights_are_refused():
    texts, graph, queries = world()
    log_phi = torch.zeros(graph.num_nodes, dtype=torch.float64)
    alone = ISORetriever(graph, log_phi).retrieve(queries, 4)
    off = ISORetriever(graph, log_phi, ISOKnobs(lexical_weight=0.0), lexical=BM25Retriever(texts)).retrieve(queries, 4)
    assert torch.equal(alone.indices, off.indices) and torch.equal(alone.scores, off.scores)
    # a question BM25 matches nowhere ranks as the walk alone (the same pool): no passage gets BM25's share for a score of 0
    for n, seed in ((30, 0), (300, 2)):
        texts, graph, queries = world(n, seed=seed)
        log_phi = torch.zeros(graph.num_nodes, dtype=torch.float64)
        unmatched = Queries(["Qwxv?"], queries.embeddings[:1])
        walk, hybrid = ISORetriever(graph, log_phi), ISORetriever(graph, log_phi, ISOKnobs(lexical_weight=1.0), lexical=BM25Retriever(texts))
        assert hybrid.retrieve(unmatched, 4).indices.tolist() == walk.retrieve(unmatched, 4).indices.tolist()
        assert float(hybrid.retrieve(unmatched, 4).scores.max()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="lexical_weight > 0 needs the lexical retriever"):
        ISORetriever(graph, log_phi, ISOKnobs(lexical_weight=1.0))
    for bad in (-0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="lexical_weight must be a finite number >= 0"):
            ISOKnobs(lexical_weight=bad)


def test_the_hybrid_keeps_quarantined_passages_out_and_near_duplicates_after_the_rest():
    texts, graph, queries = world(n=200)
    texts[8] = texts[7]  # a copy of the one passage with the question's rare word, its vector too
    graph = RetrievalGraph(graph.edge_index, torch.cat([graph.embeddings[:8], graph.embeddings[7:8], graph.embeddings[9:]]))
    log_phi = torch.zeros(graph.num_nodes, dtype=torch.float64)
    hybrid = ISORetriever(graph, log_phi, ISOKnobs(lexical_weight=1.0), lexical=BM25Retriever(texts))
    top = hybrid.retrieve(queries, 4).indices.tolist()
    assert [len({7, 8} & set(found)) for found in top] == [1, 1]  # one of the two copies; the other makes way
    copies_kept = ISORetriever(graph, log_phi, ISOKnobs(lexical_weight=1.0, near_duplicate_cosine=2.0), lexical=BM25Retriever(texts))
    assert all({7, 8} <= set(found) for found in copies_kept.retrieve(queries, 4).indices.tolist())
    quarantined = torch.zeros(graph.num_nodes, dtype=torch.bool)
    quarantined[[7, 8]] = True
    held = ISORetriever(graph, log_phi, ISOKnobs(lexical_weight=1.0), lexical=BM25Retriever(texts), quarantined=quarantined)
    assert not {7, 8} & set(held.retrieve(queries, 4).indices.flatten().tolist())  # BM25 cannot bring a quarantined passage back


def test_union_scaling_pads_ties_and_queries_without_entries():
    rows = torch.tensor([[2, 0, -1], [-1, -1, -1]])
    scores = torch.tensor([[3.0, 3.0, float("-inf")], [float("-inf")] * 3])
    other = (torch.tensor([[1, -1], [4, 1]]), torch.tensor([[0.5, float("-inf")], [2.0, 1.0]]))
    row, score, batch, ptr = minmax_union((rows, scores), other, 2.0, num_rows=5)
    assert ptr.tolist() == [0, 3, 5] and batch.tolist() == [0, 0, 0, 1, 1]
    assert row.tolist() == [0, 1, 2, 1, 4]
    assert score.tolist() == [1.0, 2.0, 1.0, 0.0, 2.0]  # a tie scales to 1; one entry alone too; the second list counts twice


def test_an_index_of_documentation_that_writes_code_is_a_hybrid_and_a_prose_index_is_not():
    assert graph_knobs({"entity_graph": {"extractor_args": {"code_spans": True}}})["iso"]["lexical_weight"] == CODE_SPAN_KNOBS["iso"]["lexical_weight"] > 0
    assert "lexical_weight" not in graph_knobs({"entity_graph": {}, "title_mention": {}})["iso"]
    texts = ["| knob | default |\n|---|---|\n| `alpha` | 0.85 |", "Raise `alpha` for longer walks.",
             "The server takes `--max-k` and `--read-timeout`.", "Set `--max-k` to 100 for larger answers.", "Plain prose, no code."]
    docs = ISORAGIndex.build([Passage(f"docs.md#{i}", "Docs", t) for i, t in enumerate(texts)], f_theta=None, phi=PhiSpec(p=0.0),
                             progress=False)
    assert docs.knobs["iso"]["lexical_weight"] == 1.0
    question = "Which read-timeout does the server take?"
    hybrid, walk = docs.retrieve([question], k=2)[0], docs.retrieve([question], k=2, lexical_weight=0.0)[0]
    # the one passage that writes the word tops the walk and BM25 alike: scaled 1 in each, 2 in the hybrid
    assert [h.id for h in hybrid][:1] == [h.id for h in walk][:1] == ["docs.md#2"]
    assert (hybrid[0].score, walk[0].score) == pytest.approx((2.0, 1.0))
    assert [(p["id"], p["score"]) for p in docs.explain(question, k=2)["top"]] == [(h.id, pytest.approx(h.score)) for h in hybrid]
