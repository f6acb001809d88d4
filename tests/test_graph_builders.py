"""Graph builders on tiny corpora with exactly known edges."""
from __future__ import annotations

import pytest
import torch

from isorag_pyg.datasets import Passage, QADataset, Question
from isorag_pyg.graph import (
    build_corpus_graph,
    context_cooccurrence,
    graph_statistics,
    knn,
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
