"""Approximate nearest-neighbour candidates: the FAISS wrapper, ANN retrieval against the exact
scan, and an index that builds, saves and loads its ANN."""
from __future__ import annotations

import json

import pytest
import torch
from test_retrievers import CFG, random_world

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.index import IndexFormatError
from isorag_pyg.retrieval import ANNIndex, DenseRetriever, ISORetriever, Queries, RetrievalGraph
from isorag_pyg.retrieval import candidates as candidates_module
from isorag_pyg.retrieval.ann import check_ann, resolve_params
from isorag_pyg.retrieval.candidates import dense_candidates
from isorag_pyg.store.storage import MANIFEST

#: ANN parameters that search every passage of a small corpus, so results must be exact.
EXHAUSTIVE = {"hnsw": {"M": 8, "ef_construction": 64, "ef_search": 400}, "ivf": {"nlist": 4, "nprobe": 4}}


def clustered(n: int = 400, d: int = 16, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(8, d, generator=gen)
    return torch.nn.functional.normalize(centres[torch.randint(0, 8, (n,), generator=gen)] + 0.5 * torch.randn(n, d, generator=gen), dim=-1)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_wrapper_round_trips_through_bytes_and_files(kind, tmp_path):
    x = clustered()
    queries = clustered(n=20, seed=1)
    ann = ANNIndex.build(x, kind)
    assert ann.num_passages == 400 and ann.dim == 16 and ann.kind == kind
    rows = ann.search(queries, 10)
    assert rows.shape == (20, 10) and rows.dtype == torch.int64
    data = ann.to_bytes()
    assert data.dtype == torch.uint8 and data.dim() == 1
    assert torch.equal(ANNIndex.from_bytes(data, kind, ann.params).search(queries, 10), rows)
    ann.save(tmp_path / "ann.safetensors")
    loaded = ANNIndex.load(tmp_path / "ann.safetensors")
    assert (loaded.kind, loaded.params) == (kind, ann.params)
    assert torch.equal(loaded.search(queries, 10), rows)
    other = "ivf" if kind == "hnsw" else "hnsw"
    with pytest.raises(ValueError, match=f"not the {other} index"):
        ANNIndex.from_bytes(data, other, resolve_params(other, None, 400))


def test_exhaustive_search_is_the_exact_top_k():
    x, queries = clustered(), clustered(n=20, seed=1)
    exact = (queries @ x.t()).topk(10, dim=1).indices
    for kind, params in EXHAUSTIVE.items():
        assert torch.equal(ANNIndex.build(x, kind, params).search(queries, 10), exact), kind


def test_the_search_parameter_changes_at_query_time():
    x, queries = clustered(), clustered(n=20, seed=1)
    ivf = ANNIndex.build(x, "ivf", {"nlist": 8, "nprobe": 1})
    ivf.set_search(100)  # more lists than there are: all of them
    assert ivf.params["nprobe"] == 8 and ivf.faiss_index.nprobe == 8
    assert torch.equal(ivf.search(queries, 10), (queries @ x.t()).topk(10, dim=1).indices)
    hnsw = ANNIndex.build(x, "hnsw")
    hnsw.set_search(77)
    assert hnsw.params["ef_search"] == 77 and hnsw.faiss_index.hnsw.efSearch == 77
    with pytest.raises(ValueError, match="ef_search'] must be an integer >= 1"):
        hnsw.set_search(0)


def test_default_parameters_are_filled_in_and_recorded():
    assert resolve_params("hnsw", None, 1000) == {"M": 32, "ef_construction": 200, "ef_search": 256}
    assert resolve_params("ivf", None, 10_000) == {"nlist": 400, "nprobe": 128, "train_size": 10_000, "seed": 0}
    assert resolve_params("ivf", {"nlist": 10}, 10_000) == {"nlist": 10, "nprobe": 10, "train_size": 640, "seed": 0}
    assert resolve_params("exact", None, 5) == {}


@pytest.mark.parametrize("kind,params,match", [
    ("annoy", None, "unknown ann 'annoy'; choose from exact, hnsw, ivf"),
    ("hnsw", {"nprobe": 4}, "unknown ann_params nprobe for ann='hnsw'; it takes M, ef_construction, ef_search"),
    ("exact", {"M": 4}, "for ann='exact'; it takes none"),
    ("hnsw", {"M": 0}, r"ann_params\['M'\] must be an integer >= 1, got 0"),
    ("ivf", {"nprobe": 2.5}, "must be an integer"),
    ("ivf", {"nlist": True}, "must be an integer"),
    ("ivf", {"seed": -1}, r"ann_params\['seed'\] must be an integer >= 0"),
])
def test_bad_ann_arguments_are_clear_errors(kind, params, match):
    with pytest.raises(ValueError, match=match):
        check_ann(kind, params)


def test_ivf_sizes_must_fit_the_corpus():
    with pytest.raises(ValueError, match="nlist'] = 50 exceeds the 40 passages"):
        resolve_params("ivf", {"nlist": 50}, 40)
    with pytest.raises(ValueError, match="train_size'] = 5 must be between nlist"):
        resolve_params("ivf", {"nlist": 10, "train_size": 5}, 40)
    with pytest.raises(ValueError, match="builds no FAISS index"):
        ANNIndex.build(clustered(), "exact")


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_exhaustive_ann_gives_the_exact_rankings(kind):
    graph, x, qe, log_phi = random_world(n=300, d=16, e=900, q=12)
    index = RetrievalGraph(graph.edge_index, x)
    ann = ANNIndex.build(x, kind, EXHAUSTIVE[kind])
    queries = Queries([""] * qe.size(0), qe)
    for knobs in (CFG, {**CFG, "max_expansion": 3, "hops": 2}):
        exact = ISORetriever(index, log_phi, **knobs).retrieve(queries, 5)
        approx = ISORetriever(index, log_phi, **knobs, ann=ann).retrieve(queries, 5)
        assert torch.equal(approx.indices, exact.indices)
        assert torch.allclose(approx.scores, exact.scores, atol=1e-5)
        assert approx.stats["candidates"] == exact.stats["candidates"]
    exact = DenseRetriever(index).retrieve(queries, 7)
    approx = DenseRetriever(index, ann=ann).retrieve(queries, 7)
    assert torch.equal(approx.indices, exact.indices) and torch.allclose(approx.scores, exact.scores, atol=1e-6)


def test_queries_the_ann_cannot_fill_fall_back_to_the_exact_scan():
    graph, x, qe, _ = random_world(n=300, d=16, e=900, q=12)
    index = RetrievalGraph(graph.edge_index, x)
    ann = ANNIndex.build(x, "ivf", {"nlist": 30, "nprobe": 1})  # ~10 passages a list: fewer than 20
    short = (ann.search(index.unit_queries(qe), 20) < 0).any(dim=1)
    assert short.any()
    got = dense_candidates(index, qe, 20, ann)
    want = dense_candidates(index, qe, 20)
    assert torch.equal(got.pool[short], want.pool[short])
    assert torch.allclose(got.pool_scores, (qe @ x.t()).gather(1, got.pool), atol=1e-6)
    assert (got.pool_scores[:, :-1] >= got.pool_scores[:, 1:]).all()  # best first


def test_pair_scores_in_blocks(monkeypatch):
    graph, x, qe, log_phi = random_world(n=300, d=16, e=900, q=12)
    index = RetrievalGraph(graph.edge_index, x)
    ann = ANNIndex.build(x, "ivf", EXHAUSTIVE["ivf"])
    queries = Queries([""] * qe.size(0), qe)
    whole = ISORetriever(index, log_phi, **CFG, ann=ann).retrieve(queries, 5)
    monkeypatch.setattr(candidates_module, "PAIR_BLOCK", 7)
    blocked = ISORetriever(index, log_phi, **CFG, ann=ann).retrieve(queries, 5)
    assert torch.equal(whole.indices, blocked.indices) and torch.equal(whole.scores, blocked.scores)


def test_an_ann_over_other_passages_is_refused():
    graph, x, _, log_phi = random_world()
    ann = ANNIndex.build(clustered(n=40, d=8), "hnsw")
    other = ANNIndex.build(clustered(n=41, d=8), "hnsw")
    ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, ann=ann)
    with pytest.raises(ValueError, match="holds 41 vectors of size 8; the retrieval graph 40 passages"):
        ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, ann=other)
    with pytest.raises(ValueError, match="holds 41 vectors"):
        DenseRetriever(RetrievalGraph(graph.edge_index, x), ann=other)


# ------------------------------------------------------------------------------- the index
CORPUS = generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=12)
QUESTIONS = [q.text for q in CORPUS.questions]


@pytest.fixture(scope="module")
def exact_index() -> ISORAGIndex:
    return ISORAGIndex.build(CORPUS.corpus, f_theta=None, phi=PhiSpec(p=0.0), progress=False)


def rankings(index: ISORAGIndex, name: str) -> list[list[str]]:
    return [[hit.id for hit in hits] for hits in index.retrieve(QUESTIONS, k=5, retriever=name)]


@pytest.mark.slow
def test_an_index_built_with_hnsw_saves_loads_and_answers_identically(exact_index, tmp_path, monkeypatch):
    index = ISORAGIndex.build(CORPUS.corpus, f_theta=None, phi=PhiSpec(p=0.0), progress=False, ann="hnsw",
                              ann_params={"ef_search": 100})
    assert index.ann.kind == "hnsw" and index.ann_info == {"kind": "hnsw", "params": {"M": 32, "ef_construction": 200, "ef_search": 100}}
    saved = index.save(tmp_path / "index")
    manifest = json.loads((saved / MANIFEST).read_text())
    assert manifest["ann"] == index.ann_info and "ann.safetensors" in manifest["files"]
    with monkeypatch.context() as patch:
        for target in ("pickle.load", "pickle.loads", "torch.load"):
            patch.setattr(target, lambda *a, **k: pytest.fail("unpickling on the load path"))
        loaded = ISORAGIndex.load(saved)
        assert loaded.ann_info == index.ann_info and not isinstance(loaded._ann, ANNIndex)  # read on first use
        assert loaded.ann.params == index.ann.params
    for name in ("iso", "iso_shuffled", "dense", "ppr"):
        # 62 passages: HNSW finds every pool exactly, so the rankings are the exact index's too
        assert rankings(loaded, name) == rankings(index, name) == rankings(exact_index, name), name
    assert loaded.retriever("iso").ann is loaded.ann
    loaded.ann.set_search(300)  # a search-time parameter changed after loading is saved
    assert ISORAGIndex.load(loaded.save(tmp_path / "wider")).ann.params["ef_search"] == 300
    assert json.loads((tmp_path / "wider" / MANIFEST).read_text())["ann"]["params"]["ef_search"] == 300
    loaded.set_ann("exact")
    assert loaded.retriever("dense").ann is None
    again = ISORAGIndex.load(loaded.save(tmp_path / "exact"))
    assert again.ann is None and not (tmp_path / "exact" / "ann.safetensors").exists()
    assert json.loads((tmp_path / "exact" / MANIFEST).read_text())["ann"] == {"kind": "exact", "params": {}}


def test_bad_ann_arguments_fail_before_encoding(monkeypatch):
    monkeypatch.setattr("isorag_pyg.index.build.SentenceEncoder", lambda *a, **k: pytest.fail("encoded"))
    for ann, params, match in [("flat", None, "unknown ann 'flat'"), ("ivf", {"nlist": 1000}, "exceeds the 62 passages"),
                               ("hnsw", {"ef": 3}, "unknown ann_params ef")]:
        with pytest.raises(ValueError, match=match):
            ISORAGIndex.build(CORPUS.corpus, f_theta=None, phi=PhiSpec(p=0.0), progress=False, ann=ann, ann_params=params)


def test_an_unreadable_ann_file_names_the_file(exact_index, tmp_path):
    with pytest.raises(ValueError, match="unknown knob"):
        exact_index.retriever("dense", ann=None)  # the index's own ANN, not a knob
    exact_index.set_ann("ivf", {"nlist": 4})
    try:
        saved = exact_index.save(tmp_path / "index")
    finally:
        exact_index.set_ann("exact")
    path = saved / "ann.safetensors"
    data = bytearray(path.read_bytes())
    data[12] ^= 0xFF  # the safetensors header
    path.write_bytes(bytes(data))
    loaded = ISORAGIndex.load(saved, verify=False)  # sizes still match; the checksum is skipped
    with pytest.raises(IndexFormatError, match="ann.safetensors: unreadable ANN index"):
        loaded.retrieve(QUESTIONS[:1])
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        ISORAGIndex.load(saved)


def test_extending_copies_and_rebuilding_derives_ivf_sizes_again():
    x = clustered()
    ann = ANNIndex.build(x[:300], "hnsw")
    grown = ann.extended(x[300:])
    assert ann.num_passages == 300 and grown.num_passages == x.size(0)  # a retriever holding `ann` still sees its 300 rows
    assert grown.params == ann.params
    ivf = ANNIndex.build(x, "ivf")  # nlist derived from N
    smaller = ivf.rebuilt(x[:100])
    assert smaller.params["nlist"] == resolve_params("ivf", {}, 100)["nlist"] < ivf.params["nlist"]
    fixed = ANNIndex.build(x, "ivf", {"nlist": 7})
    assert fixed.rebuilt(x[:100]).params["nlist"] == 7  # a size the user chose is kept
