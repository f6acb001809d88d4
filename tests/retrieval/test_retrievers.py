"""ISO-RAG retrieval step by step against a per-query reference, and the baselines."""
from __future__ import annotations

import pytest
import torch
from conftest import DEVICES
from torch_geometric.data import Data
from torch_geometric.utils import subgraph, to_undirected

from isorag_pyg.retrieval import (
    BM25Retriever,
    DenseRetriever,
    GlobalPPRRetriever,
    ISORetriever,
    Queries,
    build_local_graphs,
)
from isorag_pyg.retrieval.candidates import DenseCandidates
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.transforms import IsoperimetricFilter
from isorag_pyg.utils.ppr import personalized_pagerank

NO_EDGES = torch.empty(2, 0, dtype=torch.long)


def random_world(n=40, d=8, e=90, q=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(n, d, generator=gen), dim=-1)
    ei = torch.randint(0, n, (2, e), generator=gen)
    ei = to_undirected(ei[:, ei[0] != ei[1]], num_nodes=n)
    qe = torch.nn.functional.normalize(torch.randn(q, d, generator=gen), dim=-1)
    log_phi = torch.randn(n, generator=gen, dtype=torch.float64)
    return Data(edge_index=ei, num_nodes=n), x, qe, log_phi


def reference_candidates(scores_q, ei, m, pool_size, max_expansion):
    pool = scores_q.topk(pool_size).indices.tolist()
    seeds = pool[:m]
    nbrs = {v for u, v in ei.t().tolist() if u in seeds}
    capped = sorted(nbrs, key=lambda v: (-float(scores_q[v]), v))[:max_expansion]
    return sorted(set(pool) | set(capped)), seeds


@pytest.mark.parametrize("max_expansion", [100, 3])
def test_local_graphs_match_per_query_reference(max_expansion):
    graph, x, qe, _ = random_world()
    index = RetrievalGraph(graph.edge_index, x)
    scores = index.scores(qe)
    local = build_local_graphs(DenseCandidates.from_scores(scores, 5), index, num_seeds=2, hops=1, max_expansion=max_expansion)
    for q in range(qe.size(0)):
        nodes, seeds = reference_candidates(scores[q], index.edge_index, 2, 5, max_expansion)
        lo, hi = int(local.ptr[q]), int(local.ptr[q + 1])
        assert local.node[lo:hi].tolist() == nodes
        assert local.node[local.seed_pos[q]].tolist() == seeds
        sub, _ = subgraph(torch.tensor(nodes), index.edge_index, relabel_nodes=True)
        mine = local.edge_index[:, (local.edge_index[0] >= lo) & (local.edge_index[0] < hi)] - lo
        assert set(map(tuple, mine.t().tolist())) == set(map(tuple, sub.t().tolist()))


def reference_iso(scores_q, index, log_phi, k, cfg, weight=None):
    """One query, step by step; ``weight``: the local PPR follows ``index.edge_weight``."""
    pool_size = min(index.num_nodes, max(k, int(cfg["over_retrieval"] * k)))
    nodes, seeds = reference_candidates(scores_q, index.edge_index, cfg["num_seeds"], pool_size, cfg["max_expansion"])
    nodes_t = torch.tensor(nodes)
    sub, sub_weight = subgraph(nodes_t, index.edge_index, index.edge_weight if weight else None, relabel_nodes=True)
    local = IsoperimetricFilter(beta=cfg["beta"], phi_source="phi")(Data(edge_index=sub, edge_weight=sub_weight, log_phi=log_phi[nodes_t], num_nodes=len(nodes)))
    r = torch.zeros(len(nodes))
    r[[nodes.index(s) for s in seeds]] = torch.softmax(cfg["tau"] * scores_q[seeds], 0)
    pi = personalized_pagerank(local.edge_index, r, cfg["alpha"], tol=1e-9, max_iter=500, edge_weight=local.edge_weight).pi.squeeze(1)
    mm = lambda t: (t - t.min()) / (t.max() - t.min())
    fused = cfg["lambda_graph"] * mm(pi) + cfg["lambda_dense"] * mm(scores_q[nodes_t])
    top = fused.topk(k)
    return nodes_t[top.indices].tolist(), top.values


CFG = {"num_seeds": 3, "over_retrieval": 2.0, "max_expansion": 100, "beta": 0.4, "alpha": 0.6, "tau": 5.0, "lambda_graph": 0.7, "lambda_dense": 0.3}


@pytest.mark.parametrize("device", DEVICES)
def test_iso_retriever_matches_reference(device):
    graph, x, qe, log_phi = random_world()
    retriever = ISORetriever(RetrievalGraph(graph.edge_index, x, device), log_phi, tol=1e-9, max_iter=500, **CFG)
    result = retriever.retrieve(Queries([""] * qe.size(0), qe), k=5)
    scores = retriever.graph.scores(qe).cpu()
    index_cpu = RetrievalGraph(graph.edge_index, x)
    for q in range(qe.size(0)):
        ids, values = reference_iso(scores[q], index_cpu, log_phi, 5, CFG)
        assert result.indices[q].tolist() == ids
        assert torch.allclose(result.scores[q], values.float(), atol=1e-4)
    assert result.stats["removed_edges"] > 0


def test_chunking_and_batching_do_not_change_results():
    graph, x, qe, log_phi = random_world(q=9)
    queries = Queries([""] * 9, qe)
    whole = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, **CFG).retrieve(queries, 4)
    chunked = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, query_chunk=2, **CFG).retrieve(queries, 4)
    single = [ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, **CFG).retrieve(queries.slice(i, i + 1), 4).indices for i in range(9)]
    assert torch.equal(whole.indices, chunked.indices) and torch.equal(whole.indices, torch.cat(single))
    assert torch.allclose(whole.scores, chunked.scores)
    assert chunked.stats["queries"] == 9 and chunked.stats["candidates"] == whole.stats["candidates"]
    assert chunked.stats["ppr_iterations_max"] <= CFG.get("max_iter", 50)  # a maximum over chunks, not a sum


def test_ablation_modes_change_only_the_pruning():
    graph, x, qe, log_phi = random_world()
    queries = Queries([""] * qe.size(0), qe)
    uniform = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, phi_mode="uniform", **CFG).retrieve(queries, 5)
    assert uniform.stats["removed_edges"] == 0
    nothing_pruned = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, **{**CFG, "beta": 1e-12}).retrieve(queries, 5)
    assert torch.equal(uniform.indices, nothing_pruned.indices)
    shuffled = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, phi_mode="shuffled", seed=1, **CFG)
    assert sorted(shuffled.log_phi.tolist()) == sorted(log_phi.tolist())
    random_phi = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, phi_mode="random", seed=1, **CFG)
    assert not torch.equal(random_phi.log_phi, log_phi)


def test_traces_describe_the_local_graph():
    graph, x, qe, log_phi = random_world(q=2)
    result = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, **CFG).retrieve(Queries(["a", "b"], qe), 5, trace=True)
    t = result.traces[0]
    assert len(t["seeds"]) == 3 and set(t["seeds"]) <= set(t["candidates"])
    assert [i for i, _ in t["top"]] == result.indices[0].tolist()
    assert abs(sum(t["ppr"].values()) - 1.0) < 1e-4
    assert len(t["kept_edges"]) + len(t["pruned_edges"]) > 0


def test_edge_cases_k_seeds_without_edges_single_passage():
    graph, x, qe, log_phi = random_world(n=6, e=0)
    retriever = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, **CFG)
    res = retriever.retrieve(Queries([""] * qe.size(0), qe), k=50)  # k larger than the corpus
    assert res.indices.shape == (qe.size(0), 6)
    dense = DenseRetriever(RetrievalGraph(NO_EDGES, x)).retrieve(Queries([""] * qe.size(0), qe), 6)
    assert torch.equal(res.indices, dense.indices)  # no edges: PPR is the teleport, dense order wins
    one = ISORetriever(RetrievalGraph(NO_EDGES, x[:1]), log_phi[:1], **CFG)
    assert one.retrieve(Queries(["q"], qe[:1]), 10).indices.tolist() == [[0]]


def test_bad_inputs_give_clear_errors():
    graph, x, qe, log_phi = random_world()
    with pytest.raises(ValueError, match="NaN"):
        ISORetriever(RetrievalGraph(graph.edge_index, x * float("nan")), log_phi)
    with pytest.raises(ValueError, match="log_phi has"):
        ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi[:3])
    with pytest.raises(ValueError, match="beta"):
        ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, beta=1.5)
    with pytest.raises(ValueError, match="non-empty"):
        ISORetriever(RetrievalGraph(NO_EDGES, x[:0]), log_phi[:0])
    retriever = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi)
    with pytest.raises(ValueError, match="query embeddings have size"):
        retriever.retrieve(Queries(["q"], torch.randn(1, 3)), 5)
    with pytest.raises(ValueError, match="NaN"):
        retriever.retrieve(Queries(["q"], torch.full((1, 8), float("nan"))), 5)
    with pytest.raises(ValueError, match="k must be"):
        retriever.retrieve(Queries(["q"], qe[:1]), 0)
    with pytest.raises(ValueError, match="one embedding row per query"):
        Queries(["a", "b"], qe[:1])


def test_every_retriever_rejects_an_empty_query_batch():
    graph, x, qe, log_phi = random_world()
    empty = Queries([], qe[:0])
    for retriever in (ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi), DenseRetriever(RetrievalGraph(NO_EDGES, x)), GlobalPPRRetriever(RetrievalGraph(graph.edge_index, x)), BM25Retriever(["cats sit", "dogs bark"])):
        with pytest.raises(ValueError, match="at least one query"):
            retriever.retrieve(empty, 5)


def test_deterministic_rankings():
    graph, x, qe, log_phi = random_world()
    queries = Queries([""] * qe.size(0), qe)
    a = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, phi_mode="shuffled", **CFG).retrieve(queries, 5)
    b = ISORetriever(RetrievalGraph(graph.edge_index, x), log_phi, phi_mode="shuffled", **CFG).retrieve(queries, 5)
    assert torch.equal(a.indices, b.indices) and torch.equal(a.scores, b.scores)


def test_dense_and_global_ppr_baselines():
    graph, x, qe, _ = random_world()
    queries = Queries([""] * qe.size(0), qe)
    dense = DenseRetriever(RetrievalGraph(NO_EDGES, x), query_chunk=2).retrieve(queries, 5)
    assert torch.equal(dense.indices, (qe @ x.t()).topk(5, dim=1).indices)
    ppr = GlobalPPRRetriever(RetrievalGraph(graph.edge_index, x), num_seeds=3, alpha=0.6, tau=5.0, tol=1e-9, max_iter=500).retrieve(queries, 5)
    index = RetrievalGraph(graph.edge_index, x)
    for q in range(qe.size(0)):
        s = qe[q] @ x.t()
        seeds = s.topk(3)
        r = torch.zeros(x.size(0))
        r[seeds.indices] = torch.softmax(5.0 * seeds.values, 0)
        pi = personalized_pagerank(index.edge_index, r, 0.6, tol=1e-9, max_iter=500).pi.squeeze(1)
        assert set(ppr.indices[q].tolist()) == set(pi.topk(5).indices.tolist())


def test_bm25_ranks_lexical_matches_first():
    texts = ["the cat sat on the mat", "dogs bark loudly", "a cat and a dog", "quantum physics lecture"]
    bm25 = BM25Retriever(texts)
    res = bm25.retrieve(Queries(["cat mat", "quantum"], torch.zeros(2, 1)), k=2)
    assert res.indices[0, 0].item() == 0 and res.indices[1, 0].item() == 3
    assert bm25.retrieve(Queries(["cat"], torch.zeros(1, 1)), k=10).indices.shape == (1, 4)
    with pytest.raises(ValueError, match="no indexable terms"):
        BM25Retriever(["a b", "the of"])


def weighted_world():
    graph, x, qe, log_phi = random_world()
    gen = torch.Generator().manual_seed(5)
    src, dst = graph.edge_index
    # symmetric weights, spread over two orders of magnitude
    weight = (10 ** (2 * torch.rand(graph.num_nodes, graph.num_nodes, generator=gen))).triu()
    weight = (weight + weight.t())[src, dst]
    return graph, x, qe, log_phi, weight


def test_edge_weights_steer_local_and_global_ppr():
    graph, x, qe, log_phi, weight = weighted_world()
    queries = Queries([""] * qe.size(0), qe)
    index = RetrievalGraph(graph.edge_index, x, edge_weight=weight)
    weighted = ISORetriever(index, log_phi, tol=1e-9, max_iter=500, edge_weights=True, **CFG)
    result = weighted.retrieve(queries, k=5)
    scores = index.scores(qe)
    edges = torch.arange(index.edge_index.size(1))
    assert torch.equal(weighted.walk_edges(edges)[0], index.edge_weight) and weighted.walk_edges(edges)[1] is None  # no backlinks
    for q in range(qe.size(0)):
        ids, values = reference_iso(scores[q], index, log_phi, 5, CFG, weight=True)
        assert result.indices[q].tolist() == ids
        assert torch.allclose(result.scores[q], values.float(), atol=1e-4)
    plain = ISORetriever(index, log_phi, tol=1e-9, max_iter=500, **CFG).retrieve(queries, k=5)  # weights present, not asked for
    ones = ISORetriever(RetrievalGraph(graph.edge_index, x, edge_weight=torch.ones_like(weight)), log_phi, tol=1e-9, max_iter=500,
                        edge_weights=True, **CFG).retrieve(queries, k=5)
    assert torch.equal(plain.indices, ones.indices) and torch.allclose(plain.scores, ones.scores, atol=1e-6)
    assert not torch.allclose(plain.scores, result.scores, atol=1e-3)  # the weights do change the walk
    ppr = GlobalPPRRetriever(index, num_seeds=3, alpha=0.6, tau=5.0, tol=1e-9, max_iter=500, edge_weights=True).retrieve(queries, 5)
    for q in range(qe.size(0)):
        seeds = scores[q].topk(3)
        r = torch.zeros(x.size(0))
        r[seeds.indices] = torch.softmax(5.0 * seeds.values, 0)
        pi = personalized_pagerank(graph.edge_index, r, 0.6, tol=1e-9, max_iter=500, edge_weight=weight).pi.squeeze(1)
        assert set(ppr.indices[q].tolist()) == set(pi.topk(5).indices.tolist())
    with pytest.raises(ValueError, match="edge_weight"):
        RetrievalGraph(graph.edge_index, x, edge_weight=-weight)
    for make in (lambda i: ISORetriever(i, log_phi, edge_weights=True), lambda i: GlobalPPRRetriever(i, edge_weights=True)):
        with pytest.raises(ValueError, match="edge weights"):
            make(RetrievalGraph(graph.edge_index, x))


def test_backlinks_are_followed_at_their_share_the_rest_restarts_and_must_match_a_clean_graph():
    # path 0 - 1 - 2 - 3: each passage mentions the next one way (i -> i+1 along, i+1 -> i the backlink)
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    backlink = torch.tensor([False, True, False, True, False, True])
    x = torch.eye(4)
    graph = RetrievalGraph(edge_index, x, edge_backlink=backlink)
    queries = Queries(["q"], torch.tensor([[1.0, 0.1, 0.0, 0.0]]))
    log_phi = torch.zeros(4, dtype=torch.float64)
    knobs = {"num_seeds": 1, "over_retrieval": 4.0, "lambda_graph": 1.0, "lambda_dense": 0.0, "bridge_share": 0.0, "tol": 1e-10, "max_iter": 500}
    both = ISORetriever(graph, log_phi, backlink_weight=1.0, **knobs)
    half = ISORetriever(graph, log_phi, backlink_weight=0.5, **knobs)
    assert both.walk_edges(torch.arange(6)) == (None, None)
    assert half.walk_edges(torch.arange(6))[1].tolist() == [1.0, 0.5, 1.0, 0.5, 1.0, 0.5]
    walked = {name: r.retrieve(queries, 4, trace=True).traces[0]["ppr"] for name, r in (("both", both), ("half", half))}
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    # a backlink taken at half its probability: the other half restarts at the seed, nothing is pushed further down the chain
    expected = personalized_pagerank(edge_index, r, 0.85, tol=1e-12, max_iter=2000, edge_follow=torch.where(backlink, 0.5, 1.0)).pi.squeeze(1)
    assert [walked["half"][i] for i in range(4)] == pytest.approx(expected.tolist(), abs=1e-6)
    assert walked["half"][0] > walked["both"][0] and walked["half"][3] < walked["both"][3]
    assert half.retrieve(queries, 4).indices.tolist() == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="edge_backlink needs one flag per edge"):
        RetrievalGraph(edge_index, x, edge_backlink=backlink[:3])
    with pytest.raises(ValueError, match="edge_backlink needs one flag per edge"):
        RetrievalGraph(torch.tensor([[0, 1], [1, 2]]), x, edge_backlink=torch.tensor([True, False]))  # not symmetric


@pytest.mark.parametrize("device", DEVICES)
def test_near_duplicates_take_one_slot_of_the_top_k_and_are_ranked_after_the_rest_not_dropped(device):
    # passages 0-2 are one text three times, 3 and 4 other passages the question also reads like, 5 far off
    x = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.01, 0.0], [1.0, 0.02, 0.0], [0.6, 0.8, 0.0], [0.6, 0.0, 0.8], [0.0, 0.0, -1.0]])
    graph = RetrievalGraph(NO_EDGES, x, device=device)
    queries = Queries(["q"], torch.tensor([[1.0, 0.3, 0.2]]))
    log_phi = torch.zeros(6, dtype=torch.float64)
    knobs = {"num_seeds": 1, "over_retrieval": 2.0, "lambda_graph": 0.0, "lambda_dense": 1.0, "bridge_share": 0.0}
    spread = ISORetriever(graph, log_phi, **knobs).retrieve(queries, 3)
    assert spread.indices.tolist() == [[2, 3, 4]]  # the default (0.85): one copy, then the next passages
    assert ISORetriever(graph, log_phi, near_duplicate_cosine=2.0, **knobs).retrieve(queries, 3).indices.tolist() == [[2, 1, 0]]
    every = ISORetriever(graph, log_phi, **knobs).retrieve(queries, 6)
    assert every.indices.tolist() == [[2, 3, 4, 5, 1, 0]]  # nothing lost: the copies come after the rest, with their own scores
    assert every.scores[0, 4] > every.scores[0, 3]
    two = Queries(["q", "far"], torch.tensor([[1.0, 0.3, 0.2], [0.0, 0.1, -1.0]]))  # two queries, local graphs of their own
    assert ISORetriever(graph, log_phi, **knobs).retrieve(two, 3).indices.tolist() == [[2, 3, 4], [5, 3, 2]]
    for bad in (float("nan"), -1.5):
        with pytest.raises(ValueError, match="near_duplicate_cosine must be a number >= -1"):
            ISORetriever(graph, log_phi, near_duplicate_cosine=bad)
