"""Graph builders on tiny corpora with exactly known edges."""
from __future__ import annotations

import math

import pytest
import torch

from isorag_pyg.datasets import Passage, QADataset, Question
from isorag_pyg.graph import (
    build_corpus_graph,
    context_cooccurrence,
    entity_comention,
    entity_mentions,
    graph_statistics,
    knn,
    noise_edges,
    run_builders,
    title_mention,
    train_cooccurrence,
)


def edges(ei: torch.Tensor) -> set[tuple[int, int]]:
    return set(map(tuple, ei.t().tolist()))


CORPUS = [
    Passage("0", "Paris", "Paris is the capital of France. Parisian food is good."),
    Passage("1", "France", "France borders Spain and has Paris."),
    Passage("2", "Spain", "Spain is south of France; see Get Low."),
    Passage("3", "Get Low (song)", "A song. Not about spain (lowercase)."),
    Passage("4", "Ab", "Ab is too short to match; mentions nothing."),
]


def test_title_mention_exact_edges():
    assert edges(title_mention(CORPUS)) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3)}


def test_title_mention_options():
    assert (3, 2) in edges(title_mention(CORPUS, case_sensitive=False))
    assert (2, 3) not in edges(title_mention(CORPUS, strip_parenthetical=False))
    dup = CORPUS + [Passage("5", "Spain", "Another Spain.")]
    assert all(v != 2 for _, v in edges(title_mention(dup, max_passages_per_title=1)))


def test_title_mention_skips_chunks_of_the_same_document():
    # chunks of one file share its title; a chunk naming its own document's subject mentions no other passage
    chunks = [Passage("k.md#0", "Kostrov", "Kostrov is a town."), Passage("k.md#1", "Kostrov", "Kostrov grew."),
              Passage("a.md#0", "Aldania", "Aldania is a land."), Passage("a.md#1", "Aldania", "Aldania trades with Kostrov.")]
    assert edges(title_mention(chunks)) == {(3, 0), (3, 1)}
    issues = [Passage("issue#1", "Crash on load", "The index fails."), Passage("issue#2", "Fix", "Fixes Crash on load.")]
    assert edges(title_mention(issues)) == {(1, 0)}  # ids like path#n but other titles: not one document's chunks
    assert edges(title_mention([*CORPUS, Passage("0", "Paris", "Paris again.")])) >= {(5, 0), (0, 5)}  # ids without #n: as before


def test_cooccurrence_builders():
    q = QADataset("q", [Question("a", "?", ["x"], ["0"], ["0", "1", "2"]), Question("b", "?", ["x"], ["3"], ["3", "1"])], CORPUS)
    assert edges(context_cooccurrence(CORPUS, q)) == {(0, 1), (0, 2), (1, 2), (1, 3)}
    train_corpus = [Passage("t0", "Paris", CORPUS[0].text), Passage("t1", "Spain", CORPUS[2].text), Passage("t2", "X", "unseen")]
    train = QADataset("t", [Question("t", "?", ["x"], ["t0"], ["t0", "t1", "t2"])], train_corpus)
    ei, found = train_cooccurrence(CORPUS, train)
    assert edges(ei) == {(0, 2)} and found == 2


def test_knn_exact_neighbours_and_chunking():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    expected = {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert edges(knn(x, k=1)) == expected
    assert edges(knn(x, k=1, chunk_size=1)) == expected
    assert knn(x[:1], k=3).shape == (2, 0)


def test_build_corpus_graph_merges_and_labels():
    x = torch.randn(5, 3)
    e = {"title_mention": title_mention(CORPUS), "knn": torch.tensor([[0, 4], [1, 0]])}
    data = build_corpus_graph(CORPUS, x, e)
    assert edges(data.edge_index) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (0, 4), (4, 0)}
    src = dict(zip(map(tuple, data.edge_index.t().tolist()), data.edge_source.tolist()))
    assert src[(0, 1)] == 0b11 and src[(2, 3)] == 0b01 and src[(4, 0)] == 0b10
    assert data.edge_weight[data.edge_index[0].eq(0) & data.edge_index[1].eq(1)].item() == 2
    assert data.passage_id == ["0", "1", "2", "3", "4"] and data.leak is False
    stats = graph_statistics(data)
    assert stats["nodes"] == 5 and stats["edges"] == 4 and stats["isolated_nodes"] == 0
    assert stats["degree_max"] == 2
    assert stats["edge_share_title_mention"] == pytest.approx(6 / 8) and stats["edge_share_knn"] == pytest.approx(4 / 8)


def test_a_one_way_mention_walked_backwards_is_a_backlink_unless_another_builder_made_that_edge():
    x = torch.randn(5, 3)
    # Paris <-> France and France <-> Spain mention each other; Spain mentions "Get Low", which mentions nothing back
    data = build_corpus_graph(CORPUS, x, {"title_mention": title_mention(CORPUS), "knn": torch.tensor([[0], [4]])})
    assert data.edge_backlink.dtype == torch.bool and edges(data.edge_index[:, data.edge_backlink]) == {(3, 2)}
    both = build_corpus_graph(CORPUS, x, {"title_mention": title_mention(CORPUS), "knn": torch.tensor([[3], [2]])})
    assert not both.edge_backlink.any()  # k-NN made 3 - 2 too: an undirected builder's edge is no backlink


def test_leak_flag_and_errors():
    q = QADataset("q", [Question("a", "?", ["x"], ["0"], ["0", "1"])], CORPUS)
    data = build_corpus_graph(CORPUS, torch.randn(5, 2), run_builders({"context_cooccurrence": {}}, CORPUS, torch.randn(5, 2), q))
    assert data.leak is True and graph_statistics(data)["leak"] is True
    with pytest.raises(ValueError, match="unknown graph builder"):
        run_builders({"nope": {}}, CORPUS, torch.randn(5, 2))
    with pytest.raises(ValueError, match="training questions"):
        run_builders({"train_cooccurrence": {}}, CORPUS, torch.randn(5, 2))
    with pytest.raises(ValueError, match="x must be"):
        build_corpus_graph(CORPUS, torch.randn(4, 2), {})
    with pytest.raises(ValueError, match="empty corpus"):
        build_corpus_graph([], torch.randn(0, 2), {})
    with pytest.raises(ValueError, match="outside"):
        build_corpus_graph(CORPUS, torch.randn(5, 2), {"knn": torch.tensor([[0], [9]])})


def test_graph_without_edges_has_all_isolated():
    stats = graph_statistics(build_corpus_graph(CORPUS, torch.randn(5, 2), {}))
    assert stats["edges"] == 0 and stats["isolated_nodes"] == 5


# --- natural and injected noise -------------------------------------------------------------

def test_entity_mentions_strip_function_words_and_split_particles():
    text = "In 931 Hugh, King of Italy, met Lothair II of Lotharingia. He saw The Beatles' show."
    assert entity_mentions(text) == {"hugh", "king of italy", "king", "italy", "lothair ii of lotharingia", "lothair ii",
                                     "lotharingia", "beatles"}


COMENTION = [
    Passage("0", "Paris", "Paris is in France."),
    Passage("1", "France", "France has Paris and Lyon."),
    Passage("2", "Lyon", "Lyon is in France near Paris."),
    Passage("3", "Lone (film)", "Nothing capitalised here except Lone."),
]


def test_entity_comention_edges_weights_and_document_frequency_cap():
    ei, w = entity_comention(COMENTION, max_df=3)
    assert edges(ei) == {(0, 1), (0, 2), (1, 2)} and torch.equal(w, torch.ones(3))  # "Lone" (df 1) links nothing
    weights = {name: dict(zip(map(tuple, entity_comention(COMENTION, max_df=3, weighting=name)[0].t().tolist()),
                              entity_comention(COMENTION, max_df=3, weighting=name)[1].tolist()))
               for name in ("count", "inverse_df", "idf")}
    # paris and france are in 3 passages, lyon in 2: (1, 2) shares all three
    assert weights["count"] == {(0, 1): 2.0, (0, 2): 2.0, (1, 2): 3.0}
    assert weights["inverse_df"][(1, 2)] == pytest.approx(1 / 3 + 1 / 3 + 1 / 2)
    assert weights["idf"][(0, 1)] == pytest.approx(2 * math.log(4 / 3))
    assert edges(entity_comention(COMENTION, max_df=2)[0]) == {(1, 2)}  # only lyon is specific enough
    with pytest.raises(ValueError, match="weighting"):
        entity_comention(COMENTION, weighting="tfidf")
    with pytest.raises(ValueError, match="max_df"):
        entity_comention(COMENTION, max_df=1)


def test_entity_comention_reads_titles_as_it_reads_the_text():
    # a full-width title and a title with a footnote mark meet the same names in plain text
    corpus = [Passage("0", "Ｂｅｔａ Ｃｏｒｐ", "A company."), Passage("1", "Delta Labs²", "A lab."),
              Passage("2", "", "Beta Corp bought Delta Labs.")]
    assert edges(entity_comention(corpus)[0]) == {(0, 2), (1, 2)}


def test_weighted_builder_edges_are_summed_into_edge_weight():
    x = torch.randn(4, 3)
    data = build_corpus_graph(COMENTION, x, run_builders({"entity_comention": {"max_df": 3, "weighting": "count"},
                                                          "knn": {"k": 1}}, COMENTION, x))
    weight = dict(zip(map(tuple, data.edge_index.t().tolist()), data.edge_weight.tolist()))
    knn_pairs = edges(knn(x, k=1))
    for (u, v), value in weight.items():  # symmetric, comention count plus 1 where k-NN also links the pair
        base = {(0, 1): 2.0, (0, 2): 2.0, (1, 2): 3.0}.get((min(u, v), max(u, v)), 0.0)
        assert value == base + float((u, v) in knn_pairs or (v, u) in knn_pairs) == weight[(v, u)]
    with pytest.raises(ValueError, match="weights"):
        build_corpus_graph(COMENTION, x, {"bad": (torch.tensor([[0], [1]]), torch.tensor([-1.0]))})


def test_noise_adds_seeded_hubs_and_random_shortcuts_and_records_them():
    n = 200
    corpus = [Passage(str(i), f"Title {i}", "text") for i in range(n)]
    spec = {"noise": {"hubs": 3, "hub_degree": 20, "random_ratio": 0.5, "seed": 7}}
    edges_out = run_builders(spec, corpus, torch.zeros(n, 1))  # no clean graph: nothing to scale random shortcuts by
    assert edges_out.records["noise"]["clean_edges"] == 0 and edges_out.records["noise"]["random_edges"] == 0
    noise, record = noise_edges(n, 100, hubs=3, hub_degree=20, random_ratio=0.5, seed=7)
    assert record == {"hubs": 3, "hub_degree": 20, "random_edges": 50, "random_ratio": 0.5, "seed": 7, "clean_edges": 100}
    assert noise.size(1) == 3 * 20 + 50 and bool((noise[0] != noise[1]).all())
    hub_part = noise[:, :60]
    for h in range(3):  # each hub links 20 distinct other passages
        block = hub_part[:, 20 * h: 20 * (h + 1)]
        assert block[0].unique().numel() == 1 and block[1].unique().numel() == 20
    assert torch.equal(noise, noise_edges(n, 100, hubs=3, hub_degree=20, random_ratio=0.5, seed=7)[0])  # seeded
    assert not torch.equal(noise, noise_edges(n, 100, hubs=3, hub_degree=20, random_ratio=0.5, seed=8)[0])
    # shares of the corpus
    assert noise_edges(n, 100, hubs=0.05, hub_degree=0.1)[1]["hubs"] == 10
    assert noise_edges(n, 100, hubs=0.05, hub_degree=0.1)[1]["hub_degree"] == 20
    with pytest.raises(ValueError, match="hubs"):
        noise_edges(n, 100, hubs=2.5)
    with pytest.raises(ValueError, match="random_ratio"):
        noise_edges(n, 100, random_ratio=-1)


def test_noise_builder_counts_the_other_builders_edges_and_statistics_record_it():
    x = torch.randn(len(CORPUS), 2)
    # noise listed first still runs last, on title_mention's 3 undirected edges
    spec = {"noise": {"hubs": 1, "hub_degree": 2, "random_ratio": 0.5, "seed": 3}, "title_mention": {}}
    out = run_builders(spec, CORPUS, x)
    assert list(out) == ["title_mention", "noise"] and out.records["noise"]["clean_edges"] == 3
    assert out.records["noise"]["random_edges"] == 2 and out["noise"].size(1) == 2 + 2
    data = build_corpus_graph(CORPUS, x, out)
    stats = graph_statistics(data)
    assert stats["noise_hubs"] == 1 and stats["noise_hub_degree"] == 2 and stats["noise_random_edges"] == 2 and stats["noise_seed"] == 3
    assert stats["edge_share_title_mention"] < 1.0 and stats["edge_share_noise"] > 0.0
    clean = build_corpus_graph(CORPUS, x, run_builders({"title_mention": {}}, CORPUS, x))
    assert edges(clean.edge_index) <= edges(data.edge_index)  # noise only adds
    assert not any(k.startswith("noise_") for k in graph_statistics(clean))
