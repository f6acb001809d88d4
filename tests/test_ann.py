"""Approximate nearest-neighbour candidates: the FAISS wrapper, ANN retrieval against the exact
scan."""
from __future__ import annotations


import pytest
import torch
from test_retrievers import CFG, random_world

from isorag_pyg.retrieval import ANNIndex, DenseRetriever, GraphIndex, ISORetriever, Queries
from isorag_pyg.retrieval import candidates as candidates_module
from isorag_pyg.retrieval.ann import check_ann, resolve_params
from isorag_pyg.retrieval.candidates import dense_candidates

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
    assert ivf.params["nprobe"] == 8 and ivf.index.nprobe == 8
    assert torch.equal(ivf.search(queries, 10), (queries @ x.t()).topk(10, dim=1).indices)
    hnsw = ANNIndex.build(x, "hnsw")
    hnsw.set_search(77)
    assert hnsw.params["ef_search"] == 77 and hnsw.index.hnsw.efSearch == 77
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
    index = GraphIndex(graph.edge_index, x)
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
    index = GraphIndex(graph.edge_index, x)
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
    index = GraphIndex(graph.edge_index, x)
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
    ISORetriever(GraphIndex(graph.edge_index, x), log_phi, ann=ann)
    with pytest.raises(ValueError, match="holds 41 vectors of size 8; the graph index 40 passages"):
        ISORetriever(GraphIndex(graph.edge_index, x), log_phi, ann=other)
    with pytest.raises(ValueError, match="holds 41 vectors"):
        DenseRetriever(GraphIndex(graph.edge_index, x), ann=other)
