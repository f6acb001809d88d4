"""An index over an entity graph: built, retrieved over, saved, checked on load and updated as a
rebuild would."""
from __future__ import annotations

import json
import logging

import pytest
import torch
from entity_corpus import CORPUS, TEXTS, entity_index

from isorag_pyg import FThetaConfig, ISORAGIndex, PhiSpec
from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph.auto import ENTITY_GRAPH_KNOBS
from isorag_pyg.graph.entity_graph import entity_graph
from isorag_pyg.graph.query_entities import QueryEntityMatcher
from isorag_pyg.index import IndexFormatError
from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.retrieval import ISORetriever, RetrievalGraph
from isorag_pyg.retrieval.scoring import score_local_graphs
from isorag_pyg.store.storage import MANIFEST, _manifest_digest
from isorag_pyg.utils.files import file_sha256


@pytest.fixture(scope="module")
def index() -> ISORAGIndex:
    return entity_index()

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

#: Articles whose subject is named in their title only, and a passage that names two of them.
TITLED = [Passage("gibson", "Clement Gibson", "He was an English rugby union player, born in 1890 in Leeds."),
          Passage("leeds", "Leeds", "Leeds is a city in Yorkshire, England, on the River Aire."),
          Passage("aire", "River Aire", "The River Aire flows through Leeds and Yorkshire."),
          Passage("quen", "Dara Quen", "She was a film director born in Kostrov in 1950."),
          Passage("kostrov", "Kostrov", "Kostrov is a city in Aldania, known for its silver market."),
          Passage("guild", "Northwind Guild", "Clement Gibson and Dara Quen were both members of the Northwind Guild, which met in Kostrov.")]


def test_a_title_counts_as_a_mention_so_a_passage_naming_the_subject_is_not_its_only_mention(tmp_path):
    question = "Where was Clement Gibson born?"
    untitled = ISORAGIndex.build(TITLED, graph={"entity_graph": {"titles": False}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    # the article names "Clement Gibson" in its title only: read as text, the guild passage is the name's one mention
    assert untitled.graph.unique_mentions["clementgibson"] == 5 and untitled.explain(question, k=3)["entity_seeds"] == ["guild"]
    assert untitled.retrieve([question], k=1, retriever="iso")[0][0].id == "guild"
    titled = ISORAGIndex.build(TITLED, graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)  # titles: the default
    node = len(TITLED) + titled.graph.entity_names.index("clement gibson")
    assert sorted(titled.graph.edge_index[0][titled.graph.edge_index[1] == node].tolist()) == [0, 5]  # the article and the guild
    assert "clementgibson" not in titled.graph.unique_mentions and titled.explain(question, k=3)["entity_seeds"] == ["entity:clement gibson"]
    assert [h.id for h in titled.retrieve([question], k=3, retriever="iso")[0]][:1] == ["gibson"]
    assert "guild" not in [h.id for h in titled.retrieve([question], k=3, retriever="iso")[0]]
    # adding the guild passage later gives the graph a rebuild gives, saved and loaded
    index = ISORAGIndex.load(ISORAGIndex.build(TITLED[:5], graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0),
                                               progress=False).save(tmp_path / "titled"))
    index.add(TITLED[5:])
    assert index.graph.entity_names == titled.graph.entity_names and index.graph.unique_mentions == titled.graph.unique_mentions
    for key in ("edge_index", "edge_weight", "edge_source"):
        assert torch.equal(getattr(index.graph, key), getattr(titled.graph, key)), key
    with pytest.raises(TypeError, match="titles must be true or false"):
        ISORAGIndex.build(TITLED, graph={"entity_graph": {"titles": "yes"}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)


def test_a_passage_naming_an_article_does_not_take_its_mass_by_the_backlink(tmp_path, caplog):
    question = "Where was Dara Quen born?"
    built = ISORAGIndex.build(TITLED, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    g = built.graph
    name = [*built.passages.ids, *g.entity_names]
    assert {(name[u], name[v]) for u, v in g.edge_index[:, g.edge_backlink].t().tolist()} >= {("quen", "guild"), ("gibson", "guild")}
    # walked both ways alike, the article's mass flows to the passage that names it; walked backwards at backlink_weight, to where it points
    assert [h.id for h in built.retrieve([question], k=2, retriever="iso", backlink_weight=1.0)[0]] == ["quen", "guild"]
    assert [h.id for h in built.retrieve([question], k=2, retriever="iso")[0]] == ["quen", "kostrov"]
    # saved and loaded, and an add equal to the rebuild, keep the backlinks
    index = ISORAGIndex.load(ISORAGIndex.build(TITLED[:5], f_theta=None, phi=PhiSpec(p=0.0), progress=False).save(tmp_path / "add"))
    index.add(TITLED[5:])
    index = ISORAGIndex.load(index.save(tmp_path / "added"))
    assert torch.equal(index.graph.edge_index, g.edge_index) and torch.equal(index.graph.edge_backlink, g.edge_backlink)
    assert [h.id for h in index.retrieve([question], k=2, retriever="iso")[0]] == ["quen", "kostrov"]
    # an index saved before backlinks were recorded loads, walks mentions both ways and says so
    del built.contents.graph.edge_backlink
    with caplog.at_level(logging.WARNING):
        old = ISORAGIndex.load(built.save(tmp_path / "old"))
    assert "backlinks" in caplog.text and getattr(old.graph, "edge_backlink", None) is None
    assert [h.id for h in old.retrieve([question], k=2, retriever="iso")[0]] == ["quen", "guild"]
    with pytest.raises(ValueError, match="backlink_weight must lie in"):
        built.retrieve([question], k=2, retriever="iso", backlink_weight=1.5)


ECHOED = [Passage("storm", "Storm over Wyoming", "It is a 1950 western film directed by Lesley Selander."),
          Passage("selander", "Lesley Selander", "Lesley Selander was an American film director born in Los Angeles."),
          Passage("tekeze", "Tekezé River", "The Tekezé River rises in the Ethiopian Highlands and joins the Atbarah."),
          Passage("atbarah", "Atbarah River", "The Atbarah River is a tributary of the Nile in Sudan."),
          Passage("echo", "Tithbro Foundation", "Storm Over Wyoming and the Tekeze River were long associated with Tithbro Foundation.")]


def test_a_question_spelling_a_title_otherwise_seeds_the_article_not_the_passage_that_copies_its_spelling():
    index = ISORAGIndex.build(ECHOED, graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    # the article's title is read title-cased too, and accents are no part of an entity's key: the
    # names the questions spell as the injected passage does are entities of the articles as well
    assert "stormoverwyoming" not in index.graph.unique_mentions and "tekezeriver" not in index.graph.unique_mentions
    for question, entity, article in (("Who directed Storm Over Wyoming?", "entity:storm over wyoming", "storm"),
                                      ("Which river does the Tekeze River join?", "entity:tekezé river", "tekeze")):
        assert index.explain(question, k=3)["entity_seeds"] == [entity]
        assert [h.id for h in index.retrieve([question], k=1, retriever="iso")[0]] == [article]
    untitled = ISORAGIndex.build(ECHOED, graph={"entity_graph": {"titles": False}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert untitled.graph.unique_mentions["stormoverwyoming"] == 4  # read as text alone, the copy is the name's one mention


def test_only_the_rule_extractor_reads_a_title_a_second_time_title_cased(monkeypatch):
    from isorag_pyg.graph import corpus_graph

    read: dict[str, list[str]] = {}

    def recording(texts, extractor="rules", **kwargs):  # what each extractor would be given
        read[extractor] = list(texts)
        return entity_graph(["x"] * len(texts), min_passages=1)

    monkeypatch.setattr(corpus_graph, "entity_graph", recording)
    for extractor in ("rules", "openie"):
        corpus_graph.run_builders({"entity_graph": {"extractor": extractor}}, ECHOED[:1], torch.zeros(1, 2))
    assert read["rules"] == ["Storm over Wyoming. Storm Over Wyoming. It is a 1950 western film directed by Lesley Selander."]
    assert read["openie"] == ["Storm over Wyoming. It is a 1950 western film directed by Lesley Selander."]  # an LLM reads names in any case


def test_an_entity_graph_saved_before_titles_were_read_as_names_loads_with_a_warning(tmp_path, caplog):
    built = ISORAGIndex.build(ECHOED, graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert built.statistics["builders_version"] >= 5
    with caplog.at_level(logging.WARNING):
        ISORAGIndex.load(built.save(tmp_path / "now"))
    assert "title-cased" not in caplog.text
    del built.contents.statistics["builders_version"]  # as an index saved by an earlier version
    with caplog.at_level(logging.WARNING):
        old = ISORAGIndex.load(built.save(tmp_path / "old"))
    assert "built before the entity graph read titles title-cased" in caplog.text and "isorag add" in caplog.text
    old.add([{"id": "new", "title": "Leeds", "text": "Leeds is a city."}])  # an update runs the builders again
    assert old.statistics["builders_version"] >= 5
