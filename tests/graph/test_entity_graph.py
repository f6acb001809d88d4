"""The entity graph (passage + entity nodes), the rule extractor, the adjacent builder and the
automatic default graph."""
from __future__ import annotations

import logging
import math
import unicodedata

import pytest
import torch
from entity_corpus import CORPUS, TEXTS
from torch_geometric.data import Data

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph import build_corpus_graph, graph_statistics, run_builders
from isorag_pyg.graph.auto import (
    CODE_SPAN_SHARE_THRESHOLD,
    TITLE_SHARE_THRESHOLD,
    auto_graph,
    code_span_share,
    describe_graph,
    title_mention_share,
)
from isorag_pyg.graph.builders import adjacent
from isorag_pyg.graph.entity_graph import MIN_MENTION_WEIGHT, entity_graph, entity_graph_from_extraction, specificity
from isorag_pyg.graph.extraction import EntityExtractor, Extraction
from isorag_pyg.graph.extractors import EXTRACTORS
from isorag_pyg.graph.query_entities import QueryEntityMatcher
from isorag_pyg.graph.rule_extractor import RuleExtractor
from isorag_pyg.graph.text import normalize_entity
from isorag_pyg.transforms import IsoperimetricFilter
from isorag_pyg.utils import log_phi_from_ball


def test_rule_extractor_finds_names_dates_and_numbers():
    extractor = RuleExtractor()
    assert isinstance(extractor, EntityExtractor) and EXTRACTORS["rules"] is RuleExtractor
    found = extractor.extract_one("In 2007 Dara Quen met Boso the Elder on 3 March 1984; 1,200 people came.")
    assert {"dara quen", "boso the elder", "3 march 1984", "2007", "1,200"} <= set(found)
    assert "in" not in found and extractor.extract_one("   ") == []
    assert extractor.extract(["", "Kostrov"]).entities == [[], ["kostrov"]]

def test_rule_extractor_reads_a_markdown_code_span_as_one_identifier_when_told_to():
    extractor = RuleExtractor(code_spans=True)
    found = extractor.extract_one("Set `alpha` or `--max-k` (`WANDB_MODE`, in `isorag_pyg/graph/text.py`), not `k` or `1.5`.")
    assert {"`alpha`", "`--max-k`", "`WANDB_MODE`", "`isorag_pyg/graph/text.py`"} <= set(found)
    assert not {"`k`", "`1.5`"} & set(found)  # one character, or no letter: too generic
    # TeX-style quotes, a span with spaces, an unclosed backtick: no identifier
    assert not [e for e in extractor.extract_one("the ``Faded ''(2015)`` single, `isorag index docs/`, `alpha") if e.startswith("`")]
    assert "`alpha`" not in RuleExtractor().extract_one("Set `alpha`.")  # off by default
    texts = ["The `alpha` knob.", "Raise `alpha` for longer walks.", "They met Alpha in Kostrov.", "Alpha left Kostrov."]
    graph = entity_graph(texts, extractor_args={"code_spans": True})
    # the identifier and the name in prose are two entities, however many passages write each
    assert sorted(graph.names) == ["`alpha`", "alpha", "kostrov"]
    assert sorted(graph.mentions[0][graph.mentions[1] == 4 + graph.names.index("`alpha`")].tolist()) == [0, 1]
    assert entity_graph(texts).names == ["alpha", "kostrov"]  # off: the prose name alone
    assert normalize_entity("`Alpha`") == "`alpha" != normalize_entity("Alpha") and normalize_entity("``") == normalize_entity("`-`") == ""


def test_rule_extractor_reads_any_script_normal_forms_possessives_and_whole_numbers():
    extractor = RuleExtractor()
    assert extractor.extract_one("Émile Zola wrote Germinal in Évian-les-Bains.") == ["germinal", "émile zola", "évian-les-bains"]
    assert extractor.extract_one("Øresund and Ångström") == ["ångström", "øresund"]
    composed = "Café Müller opened in Kostrov in 2007."
    assert extractor.extract_one(unicodedata.normalize("NFD", composed)) == extractor.extract_one(composed) == ["2007", "café müller", "kostrov"]
    assert extractor.extract_one("It opened in ２００７.") == ["2007"]  # full-width digits
    assert extractor.extract_one("Dara Quen's Velmora premiered in 1984.") == ["1984", "dara quen", "dara quen's velmora"]
    assert extractor.extract_one("1,2000 or 1990.5 or 123a4, but 1,200 and 2007.") == ["1,200", "2007"]  # never part of a number
    # a footnote mark or exponent is no digit of the number before it, "™" no part of a name
    assert extractor.extract_one("It opened in 1990², on 4²×12 km² of Windows™ land.") == ["12", "1990", "windows"]
    assert normalize_entity("Windows™") == normalize_entity("windows") and normalize_entity("CO₂") == "co2"
    assert extractor.extract_one("MᶜLeod met Xʷməθkʷəy̓əm elders.") == ["mcleod", "xwməθkwəy̓əm"]  # superscript letters stay letters
    graph = entity_graph_from_extraction(extractor.extract([unicodedata.normalize("NFD", "Évian water"), "Water from Évian"]), 2)
    assert graph.names == ["évian"]

def test_normalisation_merges_case_punctuation_plurals_and_spacing():
    assert normalize_entity("The Beatles'") == normalize_entity("beatles") == "beatle"
    assert normalize_entity("Cities") == "city" and normalize_entity("Kostrov") == "kostrov" and normalize_entity("--") == ""
    assert normalize_entity("Tekezé River") == normalize_entity("TEKEZE river") == "tekeze river"  # Latin accents fold
    assert normalize_entity("Akinoshū Kenji") == "akinoshu kenji"
    # an index saved before the keys dropped accents still meets a question that writes none
    assert QueryEntityMatcher([], 3, unique_mentions={"tekezériver": 2})(["Where does the Tekeze River flow?"]) == [[2]]
    # ... and a question names both of its nodes that a rebuild would merge
    assert QueryEntityMatcher(["tekezé river", "tekeze river"], 3)(["Where does the Tekezé River flow?"]) == [[3, 4]]
    assert normalize_entity("Đà Nẵng") == normalize_entity("Da Nang") and normalize_entity("हिंदी") == "हिंदी"  # marks of other scripts stay
    graph = entity_graph_from_extraction(Extraction([["New York"], ["new-york"], ["NewYork", "Paris"], ["paris"]]), 4)
    assert len(graph.names) == 2  # "new york" in three spellings, "paris" twice
    assert graph.mentions.t().tolist() == [[0, 4], [1, 4], [2, 4], [2, 5], [3, 5]]

def test_entity_graph_keeps_hubs_drops_leaves_and_adds_relations():
    entities = [["hub", f"only{i}"] for i in range(30)]
    graph = entity_graph_from_extraction(Extraction(entities), 30)
    assert graph.names == ["hub"] and graph.mentions.size(1) == 30  # no document-frequency cap by default
    assert entity_graph_from_extraction(Extraction(entities), 30, max_passages=20).names == []
    triples = [[("Kostrov", "is in", "Aldania")], [], []]
    related = entity_graph_from_extraction(Extraction([["kostrov"], ["kostrov", "aldania"], ["aldania"]], triples), 3)
    assert related.relations.t().tolist() == [[3, 4]]
    with pytest.raises(ValueError, match="covers 2 passages"):
        entity_graph_from_extraction(Extraction([[], []]), 3)
    with pytest.raises(ValueError, match="unknown entity extractor 'nope'"):
        entity_graph(TEXTS, extractor="nope")

def test_mentions_weigh_by_the_specificity_of_their_entity():
    # "hub" in all 30 passages, "pair" in two, "trio" in three
    entities = [["hub", *(["pair"] if i < 2 else []), *(["trio"] if 2 <= i < 5 else [])] for i in range(30)]
    graph = entity_graph_from_extraction(Extraction(entities), 30)
    node = {name: 30 + i for i, name in enumerate(graph.names)}
    weight = {(u, v): w for (u, v), w in zip(graph.mentions.t().tolist(), graph.mention_weight.tolist())}
    expected = lambda df: (math.log(30 / df) / math.log(30)) ** 2
    assert weight[(0, node["pair"])] == pytest.approx(expected(2)) and weight[(2, node["trio"])] == pytest.approx(expected(3))
    assert weight[(0, node["hub"])] == pytest.approx(MIN_MENTION_WEIGHT)  # an entity of every passage: the floor, never 0
    assert 1 >= weight[(0, node["pair"])] > weight[(2, node["trio"])] > weight[(0, node["hub"])] > 0
    flat = entity_graph_from_extraction(Extraction(entities), 30, idf_power=0.0)
    assert torch.equal(flat.mention_weight, torch.ones(flat.mentions.size(1)))
    assert torch.allclose(specificity(torch.tensor([2, 4]), 1000, 1.0) ** 2, specificity(torch.tensor([2, 4]), 1000, 2.0))
    for bad in (-1.0, float("nan"), "2", None, True):
        with pytest.raises(ValueError, match="idf_power must be a number >= 0"):
            specificity(torch.tensor([2]), 10, bad)
    related = entity_graph_from_extraction(Extraction([["a"], ["a", "b"], ["b"]], [[("a", "r", "b")], [], []]), 3)
    assert related.edge_weight.tolist()[-1] == 1.0 and related.edge_weight.numel() == related.edge_index.size(1)

def test_the_corpus_graph_keeps_the_mention_weights():
    x = torch.nn.functional.normalize(torch.randn(len(CORPUS), 8), dim=-1)
    edges = run_builders({"entity_graph": {}}, CORPUS, x)
    data = build_corpus_graph(CORPUS, x, edges)
    weighted = entity_graph(TEXTS)
    for (u, v), w in zip(weighted.mentions.t().tolist(), weighted.mention_weight.tolist()):
        assert data.edge_weight[(data.edge_index[0] == u) & (data.edge_index[1] == v)].item() == pytest.approx(w)
    assert float(data.edge_weight.min()) < 1.0  # "1950" and "kostrov" are less specific than a two-passage entity
    flat = build_corpus_graph(CORPUS, x, run_builders({"entity_graph": {"idf_power": 0.0}}, CORPUS, x))
    assert torch.equal(flat.edge_index, data.edge_index) and torch.equal(flat.edge_weight, torch.ones_like(flat.edge_weight))

def test_the_walk_leaves_a_passage_through_its_specific_entity_not_the_hub():
    corpus = [Passage("seed", "", "Zorvath Keel wrote about Paris and about Ostrava Lune."),
              Passage("partner", "", "Ostrava Lune is a harbour town with a lighthouse."),
              *(Passage(f"hub{i}", "", f"Paris hosted fair number {10 + i} in spring.") for i in range(10))]
    index = ISORAGIndex.build(corpus, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert index.retriever("iso").knobs.edge_weights and index.retriever("ppr").knobs.edge_weights
    question = "What did Zorvath Keel write about?"

    def partner_over_hub(weighted: bool) -> float:
        ppr = index.explain(question, k=5, entity_seeds=0.0, edge_weights=weighted)["ppr"]
        return ppr["partner"] / max(ppr[f"hub{i}"] for i in range(10))

    assert partner_over_hub(True) > 2 * partner_over_hub(False)

def test_blank_and_entity_free_passages_get_no_edge_and_a_message(caplog):
    texts = [*TEXTS, "   "]
    with caplog.at_level(logging.INFO):
        graph = entity_graph(texts)
    assert "1 passages are empty or whitespace" in caplog.text and "share no entity" in caplog.text
    linked = set(graph.mentions[0].tolist())
    assert 5 not in linked and 6 not in linked and {0, 1, 2, 3, 4} <= linked
    with pytest.raises(ValueError, match="empty text"):
        ISORAGIndex.build([{"text": "Kostrov"}, {"text": "  "}], f_theta=None, phi=PhiSpec(p=0.0), progress=False)

def test_corpus_graph_appends_entity_nodes_after_the_passages():
    x = torch.nn.functional.normalize(torch.randn(len(CORPUS), 8), dim=-1)
    data = build_corpus_graph(CORPUS, x, run_builders({"entity_graph": {}}, CORPUS, x))
    n, names = len(CORPUS), data.entity_names
    assert data.num_passages == n and data.num_nodes == n + len(names) and data.node_type.tolist() == [0] * n + [1] * len(names)
    kostrov = n + names.index("kostrov")
    mentioning = sorted(data.edge_index[0][data.edge_index[1] == kostrov].tolist())
    assert mentioning == [1, 2, 4]
    assert torch.allclose(data.x[kostrov], torch.nn.functional.normalize(x[[1, 2, 4]].sum(0), dim=0), atol=1e-6)
    stats = graph_statistics(data)
    assert (stats["passages"], stats["entities"]) == (n, len(names))
    assert stats["isolated_passage_share"] == pytest.approx(1 / n) and stats["largest_hubs"][0][1] == 3

def test_isoperimetric_filter_works_on_an_entity_graph():
    x = torch.nn.functional.normalize(torch.randn(len(CORPUS), 8), dim=-1)
    data = build_corpus_graph(CORPUS, x, run_builders({"entity_graph": {}}, CORPUS, x))
    spec = PhiSpec(p=0.0)
    log_phi = log_phi_from_ball(data.edge_index, None, spec, num_nodes=data.num_nodes)
    out = IsoperimetricFilter(beta=0.9, phi_source="phi")(Data(edge_index=data.edge_index, log_phi=log_phi, node_type=data.node_type,
                                                        num_nodes=data.num_nodes))
    src, dst = data.edge_index
    keep = (torch.minimum(log_phi[src], log_phi[dst]) - torch.maximum(log_phi[src], log_phi[dst])) >= torch.log(torch.tensor(0.9))
    assert out.edge_index.size(1) == int(keep.sum()) and out.num_removed_edges == int((~keep).sum()) > 0

def test_adjacent_links_consecutive_chunks_of_one_document():
    corpus = [Passage(i, "", "x") for i in ("a.md#0", "a.md#1", "b.md#0", "a.md#2", "c.md", "b.md#2")]
    assert adjacent(corpus).t().tolist() == [[0, 1], [1, 3]]

def test_auto_graph_chooses_by_what_the_corpus_supports(caplog):
    titled = [Passage("a.md#0", "Kostrov", "Kostrov is a city."), Passage("a.md#1", "Kostrov", "It is old."),
              Passage("b.md#0", "Aldania", "Aldania holds Kostrov.")]
    assert title_mention_share(titled) == 1.0 and list(auto_graph(titled)) == ["title_mention", "adjacent"]
    # documents that only name their own subject: no title is quoted elsewhere, so the entity graph is added
    own = [Passage(f"{name}.md#{i}", name, f"{name} is in {place}. {name} has a port.") for name in ("Kostrov", "Aldania") for i in range(2)
           for place in ["Velmora"]]
    assert title_mention_share(own) == 0.0 and list(auto_graph(own)) == ["entity_graph", "adjacent"]
    synthetic = generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=4).corpus
    assert title_mention_share(synthetic) >= TITLE_SHARE_THRESHOLD and list(auto_graph(synthetic)) == ["title_mention"]
    assert title_mention_share(CORPUS) == 0.0 and list(auto_graph(CORPUS)) == ["entity_graph"]
    # a few titles quoted among many passages: title mentions below the threshold, so the entity graph joins them
    filler = [Passage(f"n{i}", f"Note {i}", f"Plain note number {i}.") for i in range(math.ceil(3 / TITLE_SHARE_THRESHOLD))]
    sparse = [*titled, *filler]
    assert 0 < title_mention_share(sparse) < TITLE_SHARE_THRESHOLD
    assert list(auto_graph(sparse)) == ["title_mention", "entity_graph", "adjacent"]
    # documentation that writes identifiers as code: the entity graph's extractor reads them; prose does not
    assert auto_graph(own)["entity_graph"] == {} and code_span_share(own) == 0.0
    docs = [Passage(f"d.md#{i}", "Docs", f"Set `knob_{i}` to {i}." if i < 2 else f"Plain line {i}.") for i in range(20)]
    assert code_span_share(docs) == 0.1 >= CODE_SPAN_SHARE_THRESHOLD
    assert auto_graph(docs)["entity_graph"] == {"extractor_args": {"code_spans": True}}
    injected = docs[:1] + docs[2:]  # one passage of 19 writes code: 5.3%, still documentation
    assert auto_graph(injected)["entity_graph"] == {"extractor_args": {"code_spans": True}}
    prose = docs[:1] + [Passage(f"p{i}", "", f"Plain line {i}.") for i in range(int(1 / CODE_SPAN_SHARE_THRESHOLD))]
    assert auto_graph(prose)["entity_graph"] == {}  # one in 21: below the share
    lines = describe_graph({"builders": ["title_mention"], "passages": 10, "edges": 1, "isolated_passage_share": 0.8,
                            "largest_hubs": [["Kostrov", 1]]})
    assert "10 passages, 1 edges, 80.0% of passages isolated" in lines[0] and lines[1] == "largest hubs: Kostrov (1)"
    assert lines[2].startswith("warning: 80% of passages have no edge")
    with caplog.at_level(logging.WARNING):  # a build logs the warning once
        ISORAGIndex.build(titled[:1] + filler, graph={"title_mention": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert caplog.text.count("of passages have no edge") == 1
    assert "e.g. entity_graph" in lines[2]
    entity = describe_graph({"builders": ["entity_graph"], "passages": 10, "edges": 1, "isolated_passage_share": 0.8})
    assert "share few entities" in entity[-1] and "e.g. entity_graph" not in entity[-1]  # no advice to use the graph it has
