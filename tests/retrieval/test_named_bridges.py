"""A bridge the walk leaves out is walked for a question one of whose seeds names it by a specific
title (the corpus's own passages name it; an injected passage cannot make them), never when the
title is generic, only the bridge itself names the seed, or a user quarantined it; PyG's loader
walks the same graph."""
from __future__ import annotations

import pytest
import torch
from index_helpers import passages
from torch_geometric.llm import RAGQueryLoader

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.graph.builders import mention_edges
from isorag_pyg.llm import rag_components
from isorag_pyg.retrieval import Queries
from isorag_pyg.retrieval.iso_retriever import GENERIC_TITLE_SHARE, ISORetriever, specifically_named
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph

FILMS = [f"Marrow Film {i}" for i in range(10)]
SHARE = 0.015  # the two strongest bridges of 133 passages


def corpus() -> list[dict[str, str]]:
    """Ten regions (a film and the two towns it was shot in, naming each other); a director's
    article naming films 0-4 (film 0 names her back) and an injected passage naming films 5-9 that
    nobody names; 100 unrelated towns."""
    regions = []
    for i, film in enumerate(FILMS):
        regions += [
            {"id": f"film{i}", "title": film, "text": f"{film} is a drama shot in Kestrel {i} and Sorrel {i}."
             + (" It was directed by Orla Venn." if i == 0 else "")},
            {"id": f"kestrel{i}", "title": f"Kestrel {i}", "text": f"Kestrel {i} is a hill town near Sorrel {i}, where {film} was shot."},
            {"id": f"sorrel{i}", "title": f"Sorrel {i}", "text": f"Sorrel {i} lies beside Kestrel {i}; {film} premiered there."},
        ]
    return [
        {"id": "venn", "title": "Orla Venn", "text": "Orla Venn directed " + ", ".join(FILMS[:5]) + " over a long career."},
        {"id": "evil", "title": "Quorvax Society", "text": "The Quorvax Society is tied to " + ", ".join(FILMS[5:]) + "."},
        *regions, *passages(100),
    ]


@pytest.fixture(scope="module")
def index() -> ISORAGIndex:
    return ISORAGIndex.build(corpus(), graph={"title_mention": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)


def walked(index: ISORAGIndex, question: str) -> set[str]:
    """The passages whose edges ISO-RAG's walk keeps for ``question``."""
    result = index.retriever("iso", bridge_share=SHARE).retrieve(index.encode_questions([question]), 5, trace=True)
    return {index.passages.ids[row] for edge in result.traces[0]["kept_edges"] for row in edge}


def test_a_cut_bridge_a_seed_names_is_walked_for_that_question_only(index):
    retriever = index.retriever("iso", bridge_share=SHARE)
    assert {index.passages.ids[r] for r in retriever.left_out.nonzero().squeeze(1).tolist()} == {"venn", "evil"}
    assert {index.passages.ids[r] for r in retriever.named_bridge.nonzero().squeeze(1).tolist()} == {"venn"}  # film 0 names her
    question = "Who directed Marrow Film 0, the drama shot in Kestrel 0?"
    assert "venn" in walked(index, question)
    assert "venn" not in walked(index, "Where was Marrow Film 3 shot?")  # a neighbour of film 3, which does not name her
    assert "evil" not in walked(index, "Where was Marrow Film 6 shot?")  # it names film 6; film 6 does not name it
    index.quarantine(["venn"])
    try:
        assert "venn" not in walked(index, question)  # a user's quarantine holds whatever names it
    finally:
        index.quarantine(["venn"], release=True)


def test_the_rag_query_loader_walks_the_same_graph(index):
    question = "Who directed Marrow Film 0, the drama shot in Kestrel 0?"
    feature_store, graph_store, subgraph_filter = rag_components(index, k=5, bridge_share=SHARE)
    data = RAGQueryLoader((feature_store, graph_store), subgraph_filter=subgraph_filter).query(question)
    venn = data.passage_id.index("venn")
    assert feature_store.retriever.left_out[index.passages.row_of("venn")] and not data.left_out[venn]
    assert (data.edge_index == venn).any()  # its edges are kept
    placed = data.rank >= 0
    top = data.node_idx[placed][data.rank[placed].argsort()]
    assert [index.passages.ids[r] for r in top.tolist()] == [h.id for h in index.retrieve([question], k=5, bridge_share=SHARE)[0]]


def graph_of(mentions: list[tuple[int, int]], num_passages: int) -> RetrievalGraph:
    """A passage graph whose edges are the title ``mentions`` (namer, named), unit random vectors."""
    pairs = torch.tensor(mentions).t()
    edge_index = torch.cat([pairs, pairs.flip(0)], 1)
    order = (edge_index[0] * num_passages + edge_index[1]).argsort()
    forward = torch.arange(edge_index.size(1)) < pairs.size(1)
    return RetrievalGraph(edge_index[:, order], torch.randn(num_passages, 16, generator=torch.Generator().manual_seed(0)),
                          edge_backlink=~forward[order], edge_mention=forward[order])


def test_a_generic_title_or_a_mention_the_bridge_wrote_does_not_bring_it_back():
    # of 300 passages a specific title is named by at most 3: seed 0 names 1 (specific) and 5 (named by 5 passages: generic);
    # 7 names 0 (only the reverse of its own mention touches the seed)
    n = 300
    graph = graph_of([(0, 1), (0, 5), (2, 5), (3, 5), (4, 5), (6, 5), (7, 0)], n)
    assert graph.times_named()[[0, 1, 5, 7]].tolist() == [1, 1, 5, 0] and 3 <= GENERIC_TITLE_SHARE * n < 5
    assert specifically_named(graph)[[0, 1, 5, 7]].tolist() == [True, True, False, False]
    bridging = torch.zeros(n)
    bridging[[1, 5, 7]] = 1.0
    retriever = ISORetriever(graph, torch.zeros(n), bridging=bridging, bridge_share=0.01, num_seeds=1)  # equal φ: the filter keeps every edge
    assert retriever.left_out.nonzero().squeeze(1).tolist() == [1, 5, 7]
    trace = retriever.retrieve(Queries(["q"], graph.embeddings[:1]), 3, trace=True).traces[0]
    assert trace["seeds"] == [0]
    assert set(trace["kept_edges"]) == {(0, 1)}
    assert set(trace["pruned_edges"]) == {(0, 5), (0, 7)}


def test_mention_edges_are_the_title_mentions_in_their_own_direction():
    source = torch.tensor([1, 1, 2, 3])  # bit 0: title_mention, bit 1: entity_graph
    backlink = torch.tensor([False, True, False, False])
    assert mention_edges(source, ["title_mention", "entity_graph"], backlink).tolist() == [True, False, False, True]
    assert mention_edges(source, ["entity_graph", "title_mention"], backlink).tolist() == [False, False, True, True]
    assert mention_edges(source, ["entity_graph"], backlink) is None
    assert mention_edges(source, ["title_mention"], None) is None  # an index that does not record the direction
    with pytest.raises(ValueError, match="edge_mention needs one flag per edge"):
        RetrievalGraph(torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 4), edge_mention=torch.tensor([True]))
