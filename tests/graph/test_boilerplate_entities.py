"""Boilerplate entities: an entity that more than ``max_share`` of the passages (and at least
BOILERPLATE_MIN_PASSAGES) mention gets no node, and the graph's record and statistics say so."""
from __future__ import annotations

import logging

import pytest
import torch

from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph import build_corpus_graph, graph_statistics, run_builders
from isorag_pyg.graph.auto import describe_graph
from isorag_pyg.graph.entity_graph import BOILERPLATE_MIN_PASSAGES, MAX_SHARE, entity_graph, entity_graph_from_extraction
from isorag_pyg.graph.extraction import Extraction


def footer_extraction(n: int, footer_rows: int) -> Extraction:
    """``n`` passages: pairs sharing an entity ``pair{i // 2}``, the first ``footer_rows`` also
    naming "Acme" and "Contact Us" (the first ``footer_rows // 2`` "Acme" twice, in two spellings)."""
    return Extraction([[f"pair{i // 2}", *(["Acme", "Contact Us"] if i < footer_rows else []), *(["ACME"] if i < footer_rows // 2 else [])]
                       for i in range(n)])


def test_entities_of_most_passages_get_no_node_and_are_listed_most_frequent_first():
    graph = entity_graph_from_extraction(footer_extraction(200, 160), 200)
    assert "Acme" not in graph.names and "Contact Us" not in graph.names and len(graph.names) == 100  # the pairs stay
    assert graph.boilerplate == {"Acme": 160, "Contact Us": 160}  # the most frequent surface form names it; ties by key
    assert graph.mentions.size(1) == 200 and graph.passages_without_entities == 0
    record = graph.record
    assert record["boilerplate_entities"] == 2 and record["boilerplate_top"] == [["Acme", 160], ["Contact Us", 160]]
    assert record["entities"] == 100 and record["mentions"] == 200


def test_the_share_is_exclusive_tunable_and_one_keeps_every_entity():
    half = entity_graph_from_extraction(footer_extraction(200, 100), 200)  # exactly half: kept
    assert {"Acme", "Contact Us"} <= set(half.names) and half.boilerplate == {}
    assert entity_graph_from_extraction(footer_extraction(200, 100), 200, max_share=0.4).boilerplate == {"Acme": 100, "Contact Us": 100}
    assert "Acme" in entity_graph_from_extraction(footer_extraction(200, 200), 200, max_share=1).names  # 1: no cap


def test_small_corpora_keep_their_topic():
    # 30 of 30 passages name "hub": its topic, not boilerplate, below BOILERPLATE_MIN_PASSAGES passages
    assert BOILERPLATE_MIN_PASSAGES > 30 and MAX_SHARE == 0.5
    graph = entity_graph_from_extraction(Extraction([["hub", f"only{i}"] for i in range(30)]), 30)
    assert graph.names == ["hub"] and graph.boilerplate == {}
    at_floor = BOILERPLATE_MIN_PASSAGES
    assert entity_graph_from_extraction(footer_extraction(at_floor, at_floor), at_floor).boilerplate == {"Acme": at_floor, "Contact Us": at_floor}
    assert entity_graph_from_extraction(footer_extraction(at_floor - 1, at_floor - 1), at_floor - 1).boilerplate == {}


@pytest.mark.parametrize("share", [0, -0.1, 1.5, float("nan"), True, "0.5", None])
def test_a_share_outside_zero_one_is_an_error(share):
    with pytest.raises(ValueError, match="max_share must be a share of the passages in"):
        entity_graph_from_extraction(footer_extraction(4, 2), 4, max_share=share)


def test_the_builder_warns_once_and_the_statistics_name_them(caplog):
    texts = [f"the story of Kestrel{i // 2}. Contact Acme Media | Privacy Policy" if i < 160 else f"Kestrel{i // 2} is here."
             for i in range(200)]
    with caplog.at_level(logging.WARNING, logger="isorag_pyg.graph.entity_graph"):
        entity_graph(texts)
    warnings = [r.getMessage() for r in caplog.records if "boilerplate" in r.getMessage()]
    assert len(warnings) == 1 and "more than 50% of the 200 passages" in warnings[0] and "'privacy policy' (160)" in warnings[0]
    corpus = [Passage(str(i), "", text) for i, text in enumerate(texts)]
    edges = run_builders({"entity_graph": {}}, corpus, torch.zeros(200, 2))
    statistics = {**graph_statistics(build_corpus_graph(corpus, torch.zeros(200, 2), edges)), "builders": ["entity_graph"]}
    assert statistics["entity_graph_boilerplate_entities"] == 2
    assert sorted(name for name, _ in statistics["entity_graph_boilerplate_top"]) == ["contact acme media", "privacy policy"]
    line = next(line for line in describe_graph(statistics) if line.startswith("boilerplate:"))
    assert line == "boilerplate: 2 entities that most passages mention get no node: contact acme media (160), privacy policy (160)"
    assert run_builders({"entity_graph": {"max_share": 1.0}}, corpus, torch.zeros(200, 2)).records["entity_graph"]["boilerplate_entities"] == 0
