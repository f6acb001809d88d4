"""The index behind PyG's own RAGQueryLoader: feature store, graph store, subgraph filter."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.llm import RAGQueryLoader

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.index.results import node_records
from isorag_pyg.llm import rag_components

SMALL = {"num_entities": 60, "num_hubs": 2, "hub_size": 15, "num_questions": 8}


@pytest.fixture(scope="module", params=[{"title_mention": {}}, {"title_mention": {}, "entity_graph": {}}], ids=["title_mention", "entity_graph"])
def index(request) -> ISORAGIndex:
    """A passage graph, and title mentions plus the entity graph's entity nodes."""
    return ISORAGIndex.build(generate_synthetic_dataset(**SMALL).corpus, graph=request.param, f_theta=None, phi=PhiSpec(p=0.0), progress=False)


@pytest.mark.parametrize("knobs", [{}, {"beta": 0.4, "hops": 2, "max_expansion": 5}, {"phi_mode": "shuffled", "beta": 0.7},
                                   {"entity_seeds": 0.5, "hops": 2}, {"bridge_share": 0.0}, {"backlink_weight": 1.0},
                                   {"near_duplicate_cosine": 2.0}])
def test_rag_query_loader_returns_the_filtered_local_graph(index, knobs):
    assert index.graph.edge_backlink.any()  # one-way title mentions: the walk follows them backwards at backlink_weight
    feature_store, graph_store, subgraph_filter = rag_components(index, k=5, **knobs)
    loader = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter)
    removed = 0
    for question in generate_synthetic_dataset(**SMALL).questions:
        data = loader.query(question.text)
        assert data.num_nodes == len(data.passage_id) == data.node_idx.numel() == data.ppr.numel() == data.score.numel()
        assert data.passage_id == [record[0] for record in node_records(index.passages, getattr(index.graph, "entity_names", []), data.node_idx.tolist())]
        assert data.node_type.tolist() == [int(i >= len(index)) for i in data.node_idx.tolist()]
        assert torch.allclose(data.ppr.sum(), torch.tensor(1.0), atol=1e-4)  # a distribution over the local graph
        # the kept edges are corpus edges (edge_idx names them) between local nodes that pass the isoperimetric test
        assert torch.equal(index.graph.edge_index[:, data.edge_idx], data.node_idx[data.edge_index])
        log_phi = data.log_phi[data.edge_index]
        assert ((log_phi[0] - log_phi[1]).abs() <= -torch.log(torch.tensor(feature_store.retriever.knobs.beta, dtype=torch.float64)) + 1e-12).all()
        assert not data.left_out[data.edge_index].any()  # no kept edge touches a passage the walk leaves out
        removed += data.num_removed_edges
        # in the order of data.rank, the local graph gives exactly what the index retrieves
        top = ranked_rows(data)
        expected = [hit.id for hit in index.retrieve([question.text], k=5, **knobs)[0]]
        assert [index.passages[i].id for i in top.tolist()] == expected
    # at the default β this small passage graph loses no edge to φ, nor the entity graph at the β 0.05 its index stores: without
    # bridges left out, edges go only where β is set; with them (the default share), the strongest bridges' edges go too
    assert (removed > 0) == ("beta" in knobs or knobs.get("bridge_share", 0.01) > 0)
    if index.graph.num_nodes == len(index):
        assert data.entity_seed_index.numel() == 0
    else:  # the loader's walk follows the entity graph's mention weights, as the index's retrieval does
        assert feature_store.retriever.knobs.edge_weights and feature_store.retriever.knobs.beta == knobs.get("beta", 0.05)


def test_loader_local_graph_as_long_as_its_edge_list(tmp_path):
    # 4 seeds and 4 local edges (a and b each tied to the entity both name): the filter keeps
    # the seeds and the passages' ids whole, and the loader ranks as the index does
    passages = [{"title": "", "text": t} for t in ("Kostrov is old.", "Kostrov is new.", "plain words here", "more plain words")]
    index = ISORAGIndex.build(passages, graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    knobs = {"num_seeds": 4, "beta": 0.99, "entity_seeds": 0.0}
    feature_store, graph_store, subgraph_filter = rag_components(index, k=4, **knobs)
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query("Kostrov words")
    assert data.num_nodes == len(data.passage_id) == 5 and data.num_removed_edges > 0
    assert data.seed_index.numel() == 4
    top = ranked_rows(data)
    assert [index.passages[i].id for i in top.tolist()] == [hit.id for hit in index.retrieve(["Kostrov words"], k=4, **knobs)[0]]


def test_loader_ranks_near_duplicates_after_the_rest_as_the_index_does():
    texts = ["Kostrov is an old river town.", "Kostrov is an old river town!", "Kostrov is an old river town.."] + [
        f"Kostrov exports {good} by river." for good in ("grain", "timber", "salt")] + ["plain words here", "more plain words"]
    index = ISORAGIndex.build([{"title": "", "text": t} for t in texts], graph=None, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    feature_store, graph_store, subgraph_filter = rag_components(index, k=3)
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query("Is Kostrov an old river town?")
    by_score = data.node_idx[data.score.argsort(descending=True, stable=True)[:3]].tolist()
    assert sorted(by_score) == [0, 1, 2]  # the three copies score highest
    top = ranked_rows(data).tolist()
    assert top == [hit_row(index, hit) for hit in index.retrieve(["Is Kostrov an old river town?"], k=3)[0]]
    assert len(set(top) & {0, 1, 2}) == 1  # one copy, then two other passages
    kept = [hit_row(index, hit) for hit in index.retrieve(["Is Kostrov an old river town?"], k=3, near_duplicate_cosine=2.0)[0]]
    assert sorted(kept) == [0, 1, 2]  # with the ranking off, the copies fill the top 3


def test_loader_places_only_passages_when_k_exceeds_them():
    passages = [{"title": "", "text": t} for t in ("Kostrov is old.", "Kostrov is new.", "Velmora trades with Kostrov.")]
    index = ISORAGIndex.build(passages, graph={"entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert index.graph.num_nodes > len(index)  # entity nodes in the local graph too
    feature_store, graph_store, subgraph_filter = rag_components(index, k=10)
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query("Kostrov")
    assert (data.node_type[data.rank >= 0] == 0).all() and int((data.rank >= 0).sum()) == len(index)
    assert [index.passages[i].id for i in ranked_rows(data).tolist()] == [hit.id for hit in index.retrieve(["Kostrov"], k=3)[0]]


def ranked_rows(data):
    """The corpus rows of the passages data.rank places, in that order."""
    placed = (data.rank >= 0).nonzero().squeeze(1)
    return data.node_idx[placed[data.rank[placed].argsort()]]


def hit_row(index, hit):
    return [p.id for p in index.passages].index(hit.id)


def test_loader_config_sets_k_and_misuse_is_clear(index):
    feature_store, graph_store, subgraph_filter = rag_components(index, k=5)
    loader = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter, config={"k": 2})
    question = generate_synthetic_dataset(**SMALL).questions[0].text
    assert loader.query(question).num_nodes >= 2 and feature_store.config["k"] == 2
    with pytest.raises(ValueError, match="positive integer"):
        loader.config = {"k": 0}
    fresh_fs, fresh_gs, _ = rag_components(index)
    fresh_gs.register_feature_store(fresh_fs)
    with pytest.raises(RuntimeError, match="retrieve seed nodes first"):
        fresh_gs.sample_subgraph(torch.tensor([0]))
    with pytest.raises(ValueError, match="index's own"):
        graph_store.edge_index = torch.tensor([[0], [1]])


def test_loader_vouches_for_unique_mentions_as_the_index_does():
    """A passage outside the dense pool that alone writes a name the question names loses its seed
    share with ``unique_mentions_vouched``, in the loader's walk as in the index's."""
    from isorag_pyg.datasets.types import Passage

    injected = Passage("injected", "Drithfes Institute",
                       "Rain fell on green hills near quiet rivers while farmers sold apples, pears and honey; the Velmora Accord was signed there.")
    index = ISORAGIndex.build([*generate_synthetic_dataset(**SMALL).corpus, injected], graph={"title_mention": {}, "entity_graph": {}},
                              f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    question = "What is the campus city of the university attended by Saquaerpath Thel, who signed the Velmora Accord?"
    tops = {}
    for vouched in (False, True):
        knobs = {"over_retrieval": 1.0, "unique_mentions_vouched": vouched}
        feature_store, graph_store, subgraph_filter = rag_components(index, k=3, **knobs)
        loader = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter)
        tops[vouched] = [hit.id for hit in index.retrieve([question], k=3, **knobs)[0]]
        assert [index.passages[i].id for i in ranked_rows(loader.query(question)).tolist()] == tops[vouched]
    assert "injected" in tops[False] and "injected" not in tops[True]


def test_a_hybrid_index_gives_the_loader_the_walk_alone_and_says_so(caplog):
    texts = ["| knob | default |\n|---|---|\n| `alpha` | 0.85 |", "Raise `alpha` for longer walks.",
             "The server takes `--max-k` and `--read-timeout`.", "Set `--max-k` to 100 for larger answers.", "Plain prose, no code."]
    index = ISORAGIndex.build([{"title": "Docs", "text": t} for t in texts], f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert index.knobs["iso"]["lexical_weight"] > 0  # documentation that writes code: the index ranks by a hybrid with BM25
    with caplog.at_level("WARNING", logger="isorag_pyg.llm"):
        feature_store, graph_store, subgraph_filter = rag_components(index, k=3)
    assert "hybrid with BM25" in caplog.text and feature_store.retriever.knobs.lexical_weight == 0
    question = "How long may a request take to arrive?"
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query(question)
    walk = index.retrieve([question], k=3, lexical_weight=0.0)[0]
    assert [index.passages[i].id for i in ranked_rows(data).tolist()] == [hit.id for hit in walk]
    with pytest.raises(ValueError, match="lexical_weight: the loader ranks"):
        rag_components(index, k=3, lexical_weight=1.0)
