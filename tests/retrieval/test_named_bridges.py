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


def walked(index: ISORAGIndex, *questions: str) -> list[set[str]]:
    """Per question (retrieved together, one batch), the passages whose edges ISO-RAG's walk keeps."""
    result = index.retriever("iso", bridge_share=SHARE).retrieve(index.encode_questions(list(questions)), 5, trace=True)
    return [{index.passages.ids[row] for edge in trace["kept_edges"] for row in edge} for trace in result.traces]


def seeds(index: ISORAGIndex, question: str) -> set[str]:
    result = index.retriever("iso", bridge_share=SHARE).retrieve(index.encode_questions([question]), 5, trace=True)
    return {index.passages.ids[row] for row in result.traces[0]["seeds"]}


def test_a_cut_bridge_a_seed_names_is_walked_for_that_question_only(index):
    retriever = index.retriever("iso", bridge_share=SHARE)
    assert {index.passages.ids[r] for r in retriever.left_out.nonzero().squeeze(1).tolist()} == {"venn", "evil"}
    assert {index.passages.ids[r] for r in retriever.named_bridge.nonzero().squeeze(1).tolist()} == {"venn"}  # film 0 names her
    question, other = "Who directed Marrow Film 0, the drama shot in Kestrel 0?", "Where was Marrow Film 3 shot?"
    assert "film0" in seeds(index, question) and "film3" in seeds(index, other)
    first, second = walked(index, question, other)  # one batch: film 0's mention brings her back for its own question only
    assert "venn" in first and "venn" not in second  # film 3, her neighbour and a seed, does not name her
    assert "evil" not in walked(index, "Where was Marrow Film 6 shot?")[0]  # it names film 6; film 6 does not name it
    index.quarantine(["venn"])
    try:
        assert "venn" not in walked(index, question)[0]  # a user's quarantine holds whatever names it
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
    # 7 names 0 and 8 names 7 (specific, but only the reverse of 7's own mention touches the seed)
    n = 300
    graph = graph_of([(0, 1), (0, 5), (2, 5), (3, 5), (4, 5), (6, 5), (7, 0), (8, 7)], n)
    assert graph.times_named()[[0, 1, 5, 7]].tolist() == [1, 1, 5, 1] and 3 <= GENERIC_TITLE_SHARE * n < 5
    assert specifically_named(graph)[[0, 1, 5, 7]].tolist() == [True, True, False, True]
    bridging = torch.zeros(n)
    bridging[[1, 5, 7]] = 1.0
    retriever = ISORetriever(graph, torch.zeros(n), bridging=bridging, bridge_share=0.01, num_seeds=1)  # equal φ: the filter keeps every edge
    assert retriever.left_out.nonzero().squeeze(1).tolist() == [1, 5, 7]
    trace = retriever.retrieve(Queries(["q"], graph.embeddings[:1]), 3, trace=True).traces[0]
    assert trace["seeds"] == [0]
    assert (0, 1) in trace["kept_edges"] and {(0, 5), (0, 7)} <= set(trace["pruned_edges"])
    assert not {5, 7} & {row for edge in trace["kept_edges"] for row in edge}


def test_mention_edges_are_the_title_mentions_in_their_own_direction():
    source = torch.tensor([1, 1, 2, 3])  # bit 0: title_mention, bit 1: knn (3: both made the edge)
    backlink = torch.tensor([False, True, False, False])
    # an edge kNN made too is no mention: its reverse is no backlink either, so the direction is lost
    assert mention_edges(source, ["title_mention", "knn"], backlink).tolist() == [True, False, False, False]
    assert mention_edges(source, ["knn", "title_mention"], backlink).tolist() == [False, False, True, False]
    assert mention_edges(source, ["entity_graph"], backlink) is None
    assert mention_edges(source, ["title_mention"], None) is None  # an index that does not record the direction
    with pytest.raises(ValueError, match="edge_mention needs one flag per edge"):
        RetrievalGraph(torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 4), edge_mention=torch.tensor([True]))
