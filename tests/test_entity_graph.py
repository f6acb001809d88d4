"""The entity graph (passage + entity nodes), the rule extractor, the adjacent builder and the
automatic default graph: built, retrieved over, filtered, saved, updated and described."""
from __future__ import annotations

import json
import logging
import math
import unicodedata

import pytest
import torch
from conftest import DEVICES
from torch_geometric.data import Data

from isorag_pyg import FThetaConfig, ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph import build_corpus_graph, graph_statistics, run_builders
from isorag_pyg.graph.auto import ENTITY_GRAPH_KNOBS, TITLE_SHARE_THRESHOLD, auto_graph, describe_graph, title_mention_share
from isorag_pyg.graph.builders import adjacent
from isorag_pyg.graph.entity_graph import (
    EXTRACTORS,
    MIN_MENTION_WEIGHT,
    entity_graph,
    entity_graph_from_extraction,
    entity_key,
    normalize_entity,
    specificity,
)
from isorag_pyg.graph.extraction import EntityExtractor, Extraction
from isorag_pyg.graph.query_entities import QueryEntityMatcher, query_extractor
from isorag_pyg.graph.rule_extractor import RuleExtractor
from isorag_pyg.index import IndexFormatError
from isorag_pyg.index.storage import MANIFEST, _manifest_digest
from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.retrieval import ISORetriever, Queries, RetrievalGraph
from isorag_pyg.retrieval.scoring import score_local_graphs
from isorag_pyg.transforms import IsoperimetricFilter
from isorag_pyg.utils import PhiSpec as UtilsPhiSpec
from isorag_pyg.utils import log_phi_from_ball
from isorag_pyg.utils.files import file_sha256

TEXTS = [
    "Velmora is a film directed by Dara Quen. It premiered on 3 March 1984.",
    "Dara Quen was born in Kostrov in 1950.",
    "Kostrov is a city in Aldania, known for its silver market.",
    "Aldania is a country. Its flag is green; it was founded in 1950.",
    "The silver market of Kostrov opens in 1984 in the old square.",
    "a quiet note without any name at all.",
]
CORPUS = [Passage(str(i), "", text) for i, text in enumerate(TEXTS)]


def test_rule_extractor_finds_names_dates_and_numbers():
    extractor = RuleExtractor()
    assert isinstance(extractor, EntityExtractor) and EXTRACTORS["rules"] is RuleExtractor
    found = extractor.extract_one("In 2007 Dara Quen met Boso the Elder on 3 March 1984; 1,200 people came.")
    assert {"dara quen", "boso the elder", "3 march 1984", "2007", "1,200"} <= set(found)
    assert "in" not in found and extractor.extract_one("   ") == []
    assert extractor.extract(["", "Kostrov"]).entities == [[], ["kostrov"]]


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
    spec = UtilsPhiSpec(p=0.0)
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


@pytest.fixture(scope="module")
def index() -> ISORAGIndex:
    return ISORAGIndex.build(CORPUS, f_theta=None, phi=PhiSpec(p=0.0), progress=False)  # the automatic graph


def test_index_over_an_untitled_corpus_is_an_entity_graph_ranking_passages(index, tmp_path):
    assert index.graph_spec == {"entity_graph": {}} and index.statistics["edges"] > 0 and index.graph.num_nodes > len(index)
    assert index.knobs == ENTITY_GRAPH_KNOBS and index.retriever("iso").knobs.hops == ENTITY_GRAPH_KNOBS["iso"]["hops"]
    questions = ["Where was the director of Velmora born?", "Which country is Kostrov in?"]
    for name in ("iso", "ppr", "dense", "iso_uniform"):
        hits = index.retrieve(questions, k=5, retriever=name)
        assert all(len(h) == 5 and {r.id for r in h} <= {p.id for p in CORPUS} for h in hits), name
    trace = index.explain(questions[0], k=3)
    assert any(c.startswith("entity:") for c in trace["candidates"]) and all(not t["id"].startswith("entity:") for t in trace["top"])
    loaded = ISORAGIndex.load(index.save(tmp_path / "entity"))
    assert loaded.graph.entity_names == index.graph.entity_names and torch.equal(loaded.graph.x, index.graph.x)
    assert torch.equal(loaded.log_phi, index.log_phi) and loaded.info()["counts"]["entities"] == len(index.graph.entity_names)
    assert [[h.id for h in hits] for hits in loaded.retrieve(questions, retriever="iso")] == \
           [[h.id for h in hits] for hits in index.retrieve(questions, retriever="iso")]


def test_a_question_naming_what_one_passage_alone_mentions_seeds_that_passage(index, tmp_path, caplog):
    # "Velmora" and "3 March 1984" are in passage 0 only: no entity node, but a lookup to passage 0
    built = entity_graph(TEXTS)
    assert built.unique_mentions["velmora"] == 0 and built.unique_mentions["3march1984"] == 0 and "daraquen" not in built.unique_mentions
    assert entity_graph(TEXTS, min_passages=1).unique_mentions == {}  # every entity is a node then
    matcher = QueryEntityMatcher(built.names, len(TEXTS), unique_mentions=built.unique_mentions)
    dara = len(TEXTS) + built.names.index("dara quen")
    assert matcher(["Who directed Velmora?", "Where was Dara Quen born?", "nothing named here"]) == [[0], [dara], []]
    question = "Who directed Velmora?"
    assert index.explain(question, k=3)["entity_seeds"] == ["0"]  # the passage, by id
    assert index.explain(question, k=3, unique_mention_seeds=False)["entity_seeds"] == []
    # saved beside the entity names, and an index written before (names only, as a list) still loads
    directory = index.save(tmp_path / "unique")
    assert ISORAGIndex.load(directory).graph.unique_mentions == index.graph.unique_mentions == built.unique_mentions
    rewrite(directory, index.graph.entity_names)
    with caplog.at_level(logging.WARNING):
        old = ISORAGIndex.load(directory)
    assert "saved before unique mentions were kept" in caplog.text and "rebuild" in caplog.text
    assert old.graph.unique_mentions == {} and old.graph.entity_names == index.graph.entity_names
    assert old.explain(question, k=3)["entity_seeds"] == []
    names = index.graph.entity_names
    for bad in ({"names": names, "unique_mentions": {"velmora": len(TEXTS)}}, {"names": names, "unique_mentions": {"velmora": True}},
                {"names": names, "unique_mentions": ["velmora"]}, {"names": names}, {"names": names[1:], "unique_mentions": {}}):
        rewrite(directory, bad)  # a row past the passages, a bool, not a mapping, a key missing, a name missing
        with pytest.raises(IndexFormatError):
            ISORAGIndex.load(directory)


def test_a_passage_seeded_for_a_unique_mention_keeps_its_edges_and_its_seed_share():
    # passages 0 (a dense seed, also named by the question through a unique mention) and 1; entity 2 named too: 0-2, 1-2
    edge_index = torch.tensor([[0, 2, 1, 2], [2, 0, 2, 1]])
    graph = RetrievalGraph(edge_index, torch.eye(3), "cpu", normalized=True, num_passages=2)
    retriever = ISORetriever(graph, torch.zeros(3), ISOKnobs(entity_seeds=0.5))
    assert retriever.entity_weight(torch.tensor([0, 2])).tolist() == [1.0, 0.5]  # a unique mention weighs as a node of degree 1
    knobs = ISOKnobs(entity_seeds=0.5, alpha=0.5)
    pi = score_local_graphs(edge_index, torch.tensor([[0]]), torch.tensor([[1.0]]), torch.zeros(3), torch.zeros(3, dtype=torch.long),
                            torch.tensor([0, 3]), knobs, ranked=torch.tensor([True, True, False]), entity_pos=torch.tensor([0, 2]),
                            entity_weight=torch.tensor([1.0, 0.5])).pi
    assert torch.isclose(pi.sum(), torch.tensor(1.0), atol=1e-5)  # passage 0's seed share and its unique-mention share add up
    # edges into entity 2 are left out of the walk, the edge into passage 0 stays: as if 0 -> 2 and 1 -> 2 were gone
    expected = score_local_graphs(edge_index[:, [1, 3]], torch.tensor([[0]]), torch.tensor([[1.0]]), torch.zeros(3), torch.zeros(3, dtype=torch.long),
                                  torch.tensor([0, 3]), knobs.replace(reenter_entity_seeds=True), ranked=torch.tensor([True, True, False]),
                                  entity_pos=torch.tensor([0, 2]), entity_weight=torch.tensor([1.0, 0.5])).pi
    assert torch.allclose(pi, expected) and pi[0] > pi[1] > 0


def rewrite(directory, entities) -> None:
    """``entities.json`` replaced by ``entities``, its size and checksum in the manifest updated."""
    (directory / "entities.json").write_text(json.dumps(entities))
    manifest = json.loads((directory / MANIFEST).read_text())
    manifest["files"]["entities.json"] = {"bytes": (directory / "entities.json").stat().st_size, "sha256": file_sha256(directory / "entities.json")}
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    (directory / MANIFEST).write_text(json.dumps(manifest))


def test_an_update_reports_the_same_edge_changes_on_a_loaded_index(tmp_path):
    # a loaded graph does not carry its passage ids; edges must still be matched by them, not by row
    ids = [Passage(f"doc-{p.id}", p.title, p.text) for p in CORPUS]
    built = ISORAGIndex.build(ids[:4], graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    loaded = ISORAGIndex.load(built.save(tmp_path / "index"))
    in_memory, from_disk = built.add(ids[4:]), loaded.add(ids[4:])
    assert (from_disk.edges_added, from_disk.edges_removed) == (in_memory.edges_added, in_memory.edges_removed)
    assert 0 < in_memory.edges_added < built.graph.edge_index.size(1) // 2 and in_memory.edges_removed == 0
    # unique mentions follow the rows: removing passage 0 renumbers the rest, as a rebuild would
    built.remove(["doc-0"])
    rebuilt = ISORAGIndex.build(ids[1:], graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert built.graph.unique_mentions == rebuilt.graph.unique_mentions and "velmora" not in built.graph.unique_mentions
    assert built.graph.unique_mentions["daraquen"] == built.passages.row_of("doc-1") == 0  # now doc-1 alone names Dara Quen


@pytest.mark.slow
def test_updates_of_an_entity_graph_equal_a_rebuild(tmp_path):
    f_theta = FThetaConfig(trainer={"max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False})
    graph = {"entity_graph": {}, "knn": {"k": 2}}
    index = ISORAGIndex.build(CORPUS[:4], graph=graph, f_theta=f_theta, phi=PhiSpec(p=1.0), progress=False)
    report = index.add(CORPUS[4:])
    assert report.added == 2 and report.edges_added > 0
    assert report.phi_recomputed == index.graph.num_nodes > len(index) and f"{index.graph.num_nodes} graph nodes" in report.summary()
    report = index.remove(["1"])
    assert report.removed == 1 and report.edges_removed > 0
    index = ISORAGIndex.load(index.save(tmp_path / "updated"))
    rebuilt = ISORAGIndex.build(list(index.passages), graph=graph, f_theta=index.f_theta, phi=index.phi, progress=False)
    assert index.graph.entity_names == rebuilt.graph.entity_names and index.graph.unique_mentions == rebuilt.graph.unique_mentions
    for key in ("edge_index", "edge_weight", "edge_source"):
        assert torch.equal(getattr(index.graph, key), getattr(rebuilt.graph, key)), key
    assert torch.allclose(index.z, rebuilt.z, atol=1e-6) and torch.allclose(index.log_phi, rebuilt.log_phi)
    assert index.statistics == rebuilt.statistics
    questions = ["Where was the director of Velmora born?", "Which country is Kostrov in?"]
    for name in ("iso", "ppr", "dense"):
        assert [[h.id for h in hits] for hits in index.retrieve(questions, k=3, retriever=name)] == \
               [[h.id for h in hits] for hits in rebuilt.retrieve(questions, k=3, retriever=name)], name


def test_query_entities_match_entity_nodes_after_the_same_normalisation():
    matcher = QueryEntityMatcher(["Dara Quen", "The Beatles", "1950", "New York"], num_passages=10)
    assert entity_key("The Beatles'") == entity_key("beatles") and entity_key("--") == ""
    found = matcher(["Did Dara Quen meet the Beatles in 1950?", "Which Beatles album?", "nothing named here", "Is Paris in Texas?"])
    assert found == [[10, 11, 12], [11], [], []]
    assert matcher(["When did Dara Quen hear THE BEATLES in New-York?"]) == [[10, 11, 13]]  # case, "the", plural, hyphen
    assert matcher(["What Beatles album did Dara Quen buy?", "Were the Beatles in New York?"]) == [[10, 11], [11, 13]]  # opening question words
    assert matcher(["Was\tDara Quen in New York?"]) == [[10, 13]]  # any whitespace after the question word
    assert matcher(['"Did Dara Quen sing?"', "(Was Dara Quen there?)"]) == [[10], [10]]  # after an opening quote or bracket
    will = QueryEntityMatcher(["Will Smith"], num_passages=3)
    assert will(["Will Smith sang in 1950?"]) == [[3]]  # "Will" and "Can" also open names: kept


def test_questions_are_cut_by_the_rules_the_entity_graph_was_built_with():
    assert query_extractor({"entity_graph": {"extractor": "rules", "extractor_args": {"min_chars": 6, "numbers": False}}}).min_chars == 6
    assert not query_extractor({"entity_graph": {"extractor_args": {"numbers": False}}}).numbers
    assert query_extractor({"entity_graph": {"extractor": "openie", "extractor_args": {"base_url": "http://x"}}}).min_chars == 4  # rules, defaults
    assert query_extractor({"title_mention": {}}).min_chars == 4


def test_entity_seeds_take_their_share_of_the_teleport_mass():
    # one question, local nodes 0-3: passage seeds 0 and 1, entity seeds 2 and 3 with relative weights 1 and 3
    seeds, scores = torch.tensor([[0, 1]]), torch.tensor([[0.5, 0.5]])
    edge_index, dense, batch, ptr = torch.empty(2, 0, dtype=torch.long), torch.zeros(4), torch.zeros(4, dtype=torch.long), torch.tensor([0, 4])
    knobs = ISOKnobs(alpha=0.0, entity_seeds=0.4)  # alpha 0: PPR is the teleport vector itself
    pi = score_local_graphs(edge_index, seeds, scores, dense, batch, ptr, knobs, entity_pos=torch.tensor([2, 3]),
                            entity_weight=torch.tensor([1.0, 3.0])).pi
    assert torch.allclose(pi, torch.tensor([0.3, 0.3, 0.1, 0.3]))
    assert torch.allclose(score_local_graphs(edge_index, seeds, scores, dense, batch, ptr, knobs).pi, torch.tensor([0.5, 0.5, 0.0, 0.0]))
    assert torch.allclose(score_local_graphs(edge_index, seeds, scores, dense, batch, ptr, ISOKnobs(alpha=0.0, entity_seeds=0.0), entity_pos=torch.tensor([2]),
                                             entity_weight=torch.tensor([1.0])).pi, torch.tensor([0.5, 0.5, 0.0, 0.0]))


def test_the_walk_does_not_step_back_into_an_entity_seed_unless_told_to():
    # passages 0 (the seed), 1 and 4; entity 2 is named by the question, entity 3 is not: 0-2, 1-2, 0-3, 3-4
    edge_index = torch.tensor([[0, 2, 1, 2, 0, 3, 3, 4], [2, 0, 2, 1, 3, 0, 4, 3]])
    seeds, scores, dense = torch.tensor([[0]]), torch.tensor([[1.0]]), torch.zeros(5)
    batch, ptr, entity = torch.zeros(5, dtype=torch.long), torch.tensor([0, 5]), torch.tensor([2])

    passages = torch.tensor([True, True, False, False, True])

    def pi(edges, **knobs):
        return score_local_graphs(edges, seeds, scores, dense, batch, ptr, ISOKnobs(entity_seeds=0.25, **knobs), ranked=passages,
                                  entity_pos=entity, entity_weight=torch.ones(1)).pi
    sources_only = pi(edge_index)
    into_entity = edge_index[1] == 2
    assert torch.allclose(sources_only, pi(edge_index[:, ~into_entity], reenter_entity_seeds=True))  # as if the edges into 2 were gone
    reentry = pi(edge_index, reenter_entity_seeds=True)
    assert sources_only[2] < reentry[2] and sources_only[4] > reentry[4]  # the walk moves on through entity 3 to passage 4
    assert sources_only[1] > 0  # the named entity still sends its mass to the passages that mention it

    # batched with weights: question 0 names entity 2, question 1 (the same graph, nodes 5-9) names nothing
    weight = torch.tensor([0.5, 0.5, 1.0, 1.0, 0.2, 0.2, 0.7, 0.7])
    both = torch.cat([edge_index, edge_index + 5], 1)
    batch2, ptr2, seeds2 = torch.tensor([0] * 5 + [1] * 5), torch.tensor([0, 5, 10]), torch.tensor([[0], [5]])
    knobs = ISOKnobs(entity_seeds=0.25, edge_weights=True)
    batched = score_local_graphs(both, seeds2, scores.repeat(2, 1), torch.zeros(10), batch2, ptr2, knobs, torch.cat([weight, weight]),
                                 passages.repeat(2), entity, torch.ones(1)).pi
    alone = [score_local_graphs(edge_index, seeds, scores, dense, batch, ptr, knobs, weight, passages, e, torch.ones(e.numel())).pi
             for e in (entity, torch.empty(0, dtype=torch.long))]
    assert torch.allclose(batched[:5], alone[0]) and torch.allclose(batched[5:], alone[1])


def test_retrieval_seeds_the_entity_nodes_a_question_names(index):
    question = "Which country is Kostrov in?"
    named = {index.graph.entity_names[r - len(index)] for r in QueryEntityMatcher(index.graph.entity_names, len(index))([question])[0]}
    assert named == {"kostrov"}
    off = index.explain(question, k=3, entity_seeds=0.0)
    on = index.explain(question, k=3, entity_seeds=0.5)
    assert off["entity_seeds"] == [] and on["entity_seeds"] == ["entity:kostrov"]
    reentry = index.explain(question, k=3, entity_seeds=0.5, reenter_entity_seeds=True)
    assert reentry["ppr"]["entity:kostrov"] > off["ppr"].get("entity:kostrov", 0.0)
    alpha = index.retriever("iso").knobs.alpha
    assert on["ppr"]["entity:kostrov"] >= 0.5 * (1 - alpha) - 1e-6  # a source: it keeps what it teleports to itself
    assert all(not t["id"].startswith("entity:") for t in on["top"])
    with pytest.raises(ValueError, match="entity_seeds"):
        index.retriever("iso", entity_seeds=1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_entity_seeded_retrieval_is_the_same_on_every_device(device):
    """No encoder involved: random unit vectors for the passages and entity nodes of CORPUS's entity graph."""
    built = entity_graph([p.text for p in CORPUS])
    generator = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(len(CORPUS) + len(built.names), 16, generator=generator), dim=1)
    questions = ["Which country is Kostrov in?", "Did Dara Quen sing in 1984?", "nothing named here"]
    queries = Queries(questions, torch.nn.functional.normalize(torch.randn(3, 16, generator=generator), dim=1))
    matcher = QueryEntityMatcher(built.names, len(CORPUS))
    retrievers = [ISORetriever(RetrievalGraph(built.edge_index, x, d, normalized=True, num_passages=len(CORPUS)), torch.zeros(x.size(0)),
                               ISOKnobs(entity_seeds=0.5, hops=2), entity_matcher=matcher) for d in ("cpu", device)]
    assert [n.numel() for n in retrievers[1].entity_seeds(questions)] == [n.numel() for n in retrievers[0].entity_seeds(questions)] != [0, 0]
    expected, got = (r.retrieve(queries, k=4) for r in retrievers)
    assert bool((expected.indices < len(CORPUS)).all())
    assert torch.equal(got.indices.cpu(), expected.indices) and torch.allclose(got.scores.cpu(), expected.scores, atol=1e-5)
