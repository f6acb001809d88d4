"""Incremental updates equal a full rebuild over the same passages with the same f_θ."""
from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isorag_pyg import FThetaConfig, ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset

WORLD = generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=6)
CORPUS = WORLD.corpus  # 62 passages with title mentions and hubs
GRAPH = {"title_mention": {}, "knn": {"k": 3}}
TITLES = {"title_mention": {}}  # a passage graph, whose updates recompute φ only around the change
F_THETA = FThetaConfig(trainer={"max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False})


@pytest.fixture(scope="module")
def base() -> ISORAGIndex:
    return ISORAGIndex.build(CORPUS[:40], graph=GRAPH, f_theta=F_THETA, progress=False)


def copy_of(index: ISORAGIndex, tmp_path) -> ISORAGIndex:
    return ISORAGIndex.load(index.save(tmp_path / "copy"))


def assert_same_as_rebuild(index: ISORAGIndex, graph: dict | None = GRAPH) -> None:
    rebuilt = ISORAGIndex.build(list(index.passages), graph=graph, f_theta=index.f_theta, phi=index.phi, progress=False)
    assert [p.id for p in index.passages] == [p.id for p in rebuilt.passages]
    for key in ("edge_index", "edge_weight", "edge_source"):
        assert torch.equal(getattr(index.graph, key), getattr(rebuilt.graph, key)), key
    if graph and "knn" in graph:
        assert set(map(tuple, index.knn_edges.t().tolist())) == set(map(tuple, rebuilt.knn_edges.t().tolist()))
    if index.z is not None:
        assert torch.allclose(index.z, rebuilt.z, atol=1e-6)
    assert torch.allclose(index.log_phi, rebuilt.log_phi, rtol=1e-9, atol=1e-12)
    assert index.statistics == rebuilt.statistics and index.corpus_hash == rebuilt.corpus_hash
    questions = [q.text for q in WORLD.questions]
    for name in ("iso", "ppr", "dense"):
        assert [[h.id for h in hits] for hits in index.retrieve(questions, k=5, retriever=name)] == \
               [[h.id for h in hits] for hits in rebuilt.retrieve(questions, k=5, retriever=name)], name


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(added=st.sets(st.integers(40, len(CORPUS) - 1), min_size=1, max_size=15),
       removed=st.sets(st.integers(0, 39), max_size=8))
def test_add_then_remove_equals_a_rebuild(base, tmp_path_factory, added, removed):
    index = copy_of(base, tmp_path_factory.mktemp("update"))
    report = index.add([CORPUS[i] for i in sorted(added)])
    assert report.added == len(added) and report.phi_recomputed <= len(index)
    assert_same_as_rebuild(index)
    if removed:
        report = index.remove([CORPUS[i].id for i in sorted(removed)])
        assert report.removed == len(removed)
        assert_same_as_rebuild(index)


def test_updates_survive_save_and_load(base, tmp_path):
    index = copy_of(base, tmp_path)
    index.add([{"title": "Quenmora", "text": f"Quenmora is a band founded by {CORPUS[0].title}."}])
    index.remove([CORPUS[1].id])
    loaded = ISORAGIndex.load(index.save(tmp_path / "updated"))
    assert loaded.passages[len(loaded) - 1].id == "40" and loaded.passages.row_of(CORPUS[1].id) is None
    assert torch.equal(loaded.graph.edge_index, index.graph.edge_index) and torch.equal(loaded.log_phi, index.log_phi)
    assert_same_as_rebuild(loaded)


def test_phi_is_recomputed_only_around_the_change():
    names = ["Alvorn", "Brelith", "Corvane", "Dunmere", "Estrove"]
    chain = [{"id": n, "title": n, "text": f"{n} is next to {m}."} for n, m in itertools.pairwise(names)]  # Alvorn - ... - Estrove
    index = ISORAGIndex.build(chain + [{"id": "Estrove", "title": "Estrove", "text": "Estrove is the last."}], graph=TITLES,
                              f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    report = index.add([{"id": "lonely", "title": "Zyxwvut", "text": "An unrelated note."}])
    assert (report.edges_added, report.phi_recomputed) == (0, 1)  # no edge: only its own φ
    report = index.add([{"id": "Fallow", "title": "Fallow", "text": "Fallow lies beyond Estrove."}])
    assert (report.edges_added, report.phi_recomputed) == (1, 3)  # the new edge's ends and Estrove's neighbour Dunmere
    assert_same_as_rebuild(index, graph=TITLES)


def test_bad_updates_are_clear_errors(base, tmp_path):
    index = copy_of(base, tmp_path)
    with pytest.raises(ValueError, match="already in the index"):
        index.add([{"id": CORPUS[0].id, "title": "New", "text": "a different text"}])
    assert index.add([CORPUS[0]]).duplicates_skipped == 1  # the same passage again: skipped, counted
    with pytest.raises(ValueError, match="no passage with id 'nope'"):
        index.remove(["nope"])
    with pytest.raises(ValueError, match="every passage"):
        index.remove([p.id for p in index.passages])
    with pytest.raises(TypeError, match=r"list of passage ids, got the string 'p1' \(write \['p1'\]\)"):
        index.remove("p1")  # not its characters
    with pytest.raises(TypeError, match="list of passages"):
        index.add("a new passage")
    with pytest.raises(ValueError, match="no passages given"):
        index.add([])
    questions = ISORAGIndex.build(CORPUS[:10], graph={"context_cooccurrence": {}}, questions=WORLD, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    with pytest.raises(ValueError, match="rebuild it instead"):
        questions.add([CORPUS[20]])


def test_refit_retrains_f_theta_on_the_new_graph(base, tmp_path):
    index = copy_of(base, tmp_path)
    before = index.z.clone()
    report = index.add([CORPUS[45]], refit=F_THETA)
    assert report.phi_recomputed == len(index) and index.z.shape == (41, before.size(1))
    assert index.f_theta_info["metrics"] is not None


@pytest.mark.slow
@pytest.mark.parametrize("kind, params", [("hnsw", {"ef_search": 512}), ("ivf", {"nlist": 4, "nprobe": 4})])
def test_updates_keep_the_ann_index_in_step(tmp_path, kind, params):
    """Added passages enter the ANN index, a removal rebuilds it; searched exhaustively it gives the
    exact scan's rankings, and it survives save and load."""
    index = ISORAGIndex.build(CORPUS[:40], graph=GRAPH, f_theta=None, phi=PhiSpec(p=0.0), ann=kind, ann_params=params, progress=False)
    questions = [q.text for q in WORLD.questions]

    def same_as_exact() -> None:
        exact = ISORAGIndex.build(list(index.passages), graph=GRAPH, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
        assert index.ann.num_passages == len(index) and index.info()["ann"]["kind"] == kind
        for name in ("iso", "dense"):
            assert [[h.id for h in hits] for hits in index.retrieve(questions, k=5, retriever=name)] == \
                   [[h.id for h in hits] for hits in exact.retrieve(questions, k=5, retriever=name)], name

    assert index.add(CORPUS[40:]).ann == "extended"
    same_as_exact()
    assert index.remove([p.id for p in CORPUS[:10]]).ann == "rebuilt"
    same_as_exact()
    index = ISORAGIndex.load(index.save(tmp_path / "updated"))
    same_as_exact()
