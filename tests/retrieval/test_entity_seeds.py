"""Questions seed the entity nodes they name: matching, the teleport share, sources-only walks, on
every device."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import DEVICES
from entity_corpus import CORPUS, entity_index

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets.types import Passage
from isorag_pyg.graph.entity_graph import entity_graph
from isorag_pyg.graph.query_entities import QueryEntityMatcher, query_extractor
from isorag_pyg.graph.text import entity_key
from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.retrieval import ISORetriever, Queries, RetrievalGraph
from isorag_pyg.retrieval.scoring import score_local_graphs


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

def test_a_question_names_an_identifier_the_documents_write_as_code_by_its_plain_word():
    matcher = QueryEntityMatcher(["`alpha`", "`--max-k`", "`vouch_share`", "Paris", "`--servers`", "`-k`", "`does`"], num_passages=5)
    assert set(matcher.code_words) == {"alpha", "max-k", "vouch_share", "servers", "k", "does"}
    found = matcher(["What is the default alpha?", "Which max-k does the server take?", "What does --max-k do?",
                     "What is vouch_share for?", "Is `alpha` a knob?", "Is Alpha a knob?", "Is paris in France?",
                     "What is alphabet soup?", "What is k?"])
    # the identifier as written but for case and leading dashes: never a prose name, another word
    # form ("server" for "servers"), a question word ("does") or a single letter ("k" for "-k")
    assert found == [[5], [6], [6], [7], [5], [5], [], [], []]
    assert QueryEntityMatcher(["Alpha"], num_passages=1)(["the default alpha?"]) == [[]]
    both = QueryEntityMatcher(["`paris`", "Paris"], num_passages=1)  # two nodes: the code one and the name
    assert both(["Is Paris in France?"]) == [[1, 2]] and both(["What does the paris flag do?"]) == [[1]]


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

def _article_and_list(dense: list[float], seed_cosine: float):
    """One question's local graph, as ``walk(knobs, weight=None, cosines=None, entities=True) -> PPR``: passage 0 is the
    seed (cosine ``seed_cosine``); entity 2, named by the question, is mentioned by passage 1 (its own article) and by
    passage 3 (a list naming it among others); entity 4, not named, links 3 to 5. ``entities=False`` reads every node
    as a passage and seeds no entity."""
    edge_index = torch.tensor([[2, 1, 2, 3, 3, 4, 4, 5], [1, 2, 3, 2, 4, 3, 5, 4]])
    seeds, scores = torch.tensor([[0]]), torch.tensor([[seed_cosine]])
    batch, ptr, entity = torch.zeros(6, dtype=torch.long), torch.tensor([0, 6]), torch.tensor([2])
    passages = torch.tensor([True, True, False, True, False, True])

    def walk(knobs: ISOKnobs, weight: torch.Tensor | None = None, cosines: torch.Tensor | None = None, entities: bool = True) -> torch.Tensor:
        values = torch.tensor(dense) if cosines is None else cosines
        if not entities:
            return score_local_graphs(edge_index, seeds, scores, values, batch, ptr, knobs).pi
        return score_local_graphs(edge_index, seeds, scores, values, batch, ptr, knobs, weight, passages, entity, torch.ones(1)).pi
    return walk


def test_an_entity_seed_sends_its_mass_to_the_passages_that_read_like_the_question():
    # the article reads like the question, the list does not
    walk = _article_and_list([0.9, 0.7, 0.0, 0.2, 0.0, 0.1], seed_cosine=1.0)

    def pi(focus: float, weight: torch.Tensor | None = None) -> torch.Tensor:
        return walk(ISOKnobs(entity_seeds=0.5, entity_focus=focus, entity_gate=0.0), weight)
    even, focused = pi(0.0), pi(20.0)
    assert even[3] > even[1]  # evenly: the list, linked on through entity 4, outranks the article
    assert focused[1] > 5 * focused[3] and focused[1] > even[1] and focused[3] < even[3]
    assert torch.isclose(focused.sum(), even.sum())  # the mass moves between the entity's passages; none is lost
    flat = torch.zeros(6)
    assert torch.allclose(walk(ISOKnobs(entity_seeds=0.5, entity_focus=20.0), cosines=flat),
                          walk(ISOKnobs(entity_seeds=0.5, entity_focus=0.0), cosines=flat))  # equal cosines: evenly
    weight = torch.tensor([3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # the article's mention weighs 3: focus multiplies it
    assert pi(20.0, weight)[1] > focused[1] and pi(0.0, weight)[1] > even[1]
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="entity_focus"):
            ISOKnobs(entity_focus=bad)


def test_entity_focus_changes_only_edges_from_the_seeds_into_passages():
    from isorag_pyg.retrieval.scoring import focus_edges_from

    # entity 0 (the seed) -> passages 1, 2 and entity 3; entity 3 -> passages 1, 2 (not a seed)
    edge_index = torch.tensor([[0, 0, 0, 3, 3], [1, 2, 3, 1, 2]])
    dense, ranked = torch.tensor([0.0, 0.5, 0.1, 0.0]), torch.tensor([False, True, True, False])
    weight = torch.tensor([2.0, 1.0, 4.0, 1.0, 1.0])
    focused = focus_edges_from(torch.tensor([0]), edge_index, weight, dense, ranked, 10.0)
    assert torch.allclose(focused[2:], weight[2:])  # into an entity, and out of a node that is not a seed
    assert torch.isclose(focused[:2].sum(), weight[:2].sum()) and focused[0] / focused[1] > weight[0] / weight[1]
    assert torch.allclose(focus_edges_from(torch.tensor([0]), edge_index, weight, dense, ranked, 0.0), weight)
    assert torch.equal(focus_edges_from(torch.empty(0, dtype=torch.long), edge_index, None, dense, ranked, 10.0), torch.ones(5))


def test_the_entity_gate_bounds_what_a_passage_far_from_the_question_gets_of_a_named_entity():
    # the article reads as close to the question as the seed (0.8), the list does not
    walk = _article_and_list([0.8, 0.8, 0.0, 0.3, 0.0, 0.1], seed_cosine=0.8)

    def pi(gate: float) -> torch.Tensor:
        return walk(ISOKnobs(entity_seeds=0.5, entity_focus=0.0, entity_gate=gate))
    open_, gated = pi(0.0), pi(10.0)
    assert gated[3] < 0.05 * open_[3] and gated[5] < open_[5]  # the far passage, and what it passes on, lose the entity's mass
    assert gated[1] > open_[1] and gated[0] > open_[0]  # what it lost restarts at the seeds; the close passage keeps its share
    assert torch.isclose(gated.sum(), open_.sum())  # none is lost
    # the same graph read as passages only (no ranked mask, no entity seeds): nothing to gate
    assert torch.equal(walk(ISOKnobs(entity_gate=10.0), entities=False), walk(ISOKnobs(entity_gate=0.0), entities=False))
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="entity_gate"):
            ISOKnobs(entity_gate=bad)


def test_the_entity_gate_changes_only_edges_from_the_seeds_into_passages():
    from isorag_pyg.retrieval.scoring import entity_gate_shares, gate_edges_from

    # two questions (nodes 0-3 and 4-5), best seed cosines 0.6 and 0.9
    dense, batch = torch.tensor([0.6, 0.5, 0.0, 0.1, 0.9, 0.4]), torch.tensor([0, 0, 0, 0, 1, 1])
    gate = entity_gate_shares(dense, torch.tensor([[0.6, 0.2], [0.9, 0.1]]), batch, 10.0)
    assert torch.allclose(gate, torch.tensor([1.0, 0.3679, 0.0025, 0.0067, 1.0, 0.0067]), atol=1e-4)
    # entity 2 (the seed) -> passages 0 and 1 and entity 3 (far from the question); passage 0 -> passage 1 (not from a seed)
    edge_index = torch.tensor([[2, 2, 0, 2], [0, 1, 1, 3]])
    ranked = torch.tensor([True, True, False, False, True, True])
    follow = gate_edges_from(torch.tensor([2]), edge_index, torch.tensor([1.0, 0.5, 1.0, 1.0]), ranked, gate)
    assert torch.allclose(follow, torch.tensor([1.0, 0.5 * 0.3679, 1.0, 1.0]), atol=1e-4)  # into an entity or from a passage: unchanged
    assert torch.equal(gate_edges_from(torch.empty(0, dtype=torch.long), edge_index, None, ranked, gate), torch.ones(4))


@pytest.fixture(scope="module")
def index() -> ISORAGIndex:
    return entity_index()


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

def test_an_index_of_markdown_docs_seeds_the_code_node_a_question_names_as_a_plain_word():
    texts = ["| knob | default |\n|---|---|\n| `alpha` | 0.85 |", "Raise `alpha` for longer walks.",
             "The server takes `--max-k` and `--read-timeout`.", "Set `--max-k` to 100 for larger answers.", "Plain prose, no code."]
    docs = ISORAGIndex.build([Passage(f"docs.md#{i}", "Docs", t) for i, t in enumerate(texts)], f_theta=None, phi=PhiSpec(p=0.0),
                             progress=False)
    assert {"`alpha`", "`--max-k`"} <= set(docs.graph.entity_names)
    assert docs.explain("What is the default alpha?", k=2)["entity_seeds"] == ["entity:`alpha`"]
    assert docs.explain("Which max-k does the server take?", k=2)["entity_seeds"] == ["entity:`--max-k`"]
    assert docs.explain("Is the prose plain?", k=2)["entity_seeds"] == []


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


def test_a_name_without_a_node_reads_as_the_nodes_that_contain_it_or_nearly_spell_it_not_as_a_copying_passage():
    names = ["LaHave River", "Margraviate", "Charle Metcalfe", "October 24 1999", "John Smith", "John Doe", "John Brown", "John Gray"]
    # passages 3-6 alone write "LaHave", "Margaraviate", "Harlem" and "John" (as a passage copying a question would)
    matcher = QueryEntityMatcher(names, num_passages=10, unique_mentions={"lahave": 3, "margaraviate": 4, "harlem": 5, "john": 6})
    assert matcher(["What district is LaHave in?"]) == [[10]]  # the river's node (whole words), not passage 3
    assert matcher(["What is the Margaraviate of Brandenburg?"]) == [[11]]  # a misspelling of the node's name, not passage 4
    assert matcher(["Which rapper is from Harlem?"]) == [[5]]  # "Charle Metcalfe" does not contain the word "Harlem"
    assert matcher(["Who did John marry?"]) == [[6]]  # contained in four names: too generic to read as any of them
    assert matcher.readings("October 27, 1999", "october271999") == []  # a date is not misspelt: no near match for digits
    assert matcher(["Where does the LaHave River flow?"]) == [[10]]  # a name with its own node keeps it


def test_an_entity_seed_not_vouched_for_gives_its_share_back_to_its_own_questions_passage_seeds():
    # question 0 as above (passage seeds 0 and 1, entity seeds 2 and 3 with weights 1 and 3, share 0.4; seed 3 not vouched
    # for); question 1 (nodes 4-6): passage seed 4, entity seed 5 vouched for, so its share stays
    seeds, scores = torch.tensor([[0, 1], [4, 4]]), torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    edge_index, dense = torch.empty(2, 0, dtype=torch.long), torch.zeros(7)
    batch, ptr = torch.tensor([0, 0, 0, 0, 1, 1, 1]), torch.tensor([0, 4, 7])

    def pi(vouched: torch.Tensor | None) -> torch.Tensor:
        return score_local_graphs(edge_index, seeds, scores, dense, batch, ptr, ISOKnobs(alpha=0.0, entity_seeds=0.4),
                                  entity_pos=torch.tensor([2, 3, 5]), entity_weight=torch.tensor([1.0, 3.0, 1.0]), entity_vouched=vouched).pi
    assert torch.allclose(pi(torch.tensor([True, False, True])), torch.tensor([0.45, 0.45, 0.1, 0.0, 0.6, 0.4, 0.0]))
    assert torch.allclose(pi(torch.tensor([True, True, True])), pi(None))
    assert torch.allclose(pi(None), torch.tensor([0.3, 0.3, 0.1, 0.3, 0.6, 0.4, 0.0]))


def test_the_matcher_knows_which_unique_mentions_a_question_names_by_their_passage_title():
    unique = {"wolfgangsmith": 3, "novemberrevolution": 4, "getlow": 5}
    titles = {3: "Wolfgang Smith", 4: "Stundzos Institute", 5: "Get Low (song)"}
    matcher = QueryEntityMatcher(["Dara Quen"], num_passages=6, unique_mentions=unique, title_of=titles.__getitem__)
    question = "Was Wolfgang Smith in the November Revolution?"
    assert matcher([question]) == [[3, 4]] and matcher.titled_rows([question, "Who is Dara Quen?"]) == [{3}, set()]
    assert matcher.titled_rows(["Who sang Get Low?"]) == [{5}]  # the title without its disambiguator
    assert QueryEntityMatcher(["Dara Quen"], num_passages=6, unique_mentions=unique).titled_rows([question]) == [set()]  # no titles


QUESTION = "Did Dara Quen, Wolfgang Smith and the November Revolution meet?"


def _far_unique_mentions(vouched: bool, near: bool = False, matcher=None, bridging: torch.Tensor | None = None,
                         **knobs: Any) -> tuple[ISORetriever, Queries]:
    """One question over 20 passages (cosines 0.9 .. 0.1 and 0, 0; the dense pool of a top 2 is
    10) and the entity node 20 (named by the question and by passages 0 and 1) whose passages 18
    (titled "Wolfgang Smith (mathematician)") and 19 alone write names the question names; with
    ``near`` passage 19 is in the pool (cosine 0.85). PPR is the teleport vector (alpha 0). No
    passage needs a voucher by its bridging score unless ``bridging`` is given."""
    cosines = torch.cat([torch.linspace(0.9, 0.1, 18), torch.tensor([0.0, 0.85 if near else 0.0])])
    x = torch.zeros(21, 32)
    x[:20, 0] = cosines
    x[torch.arange(20), torch.arange(1, 21)] = (1 - cosines**2).sqrt()
    x[20, 31] = 1.0
    edge_index = torch.tensor([[0, 20, 1, 20], [20, 0, 20, 1]])
    titles = {18: "Wolfgang Smith (mathematician)", 19: "Stundzos Institute"}
    matcher = matcher or QueryEntityMatcher(["Dara Quen"], num_passages=20, unique_mentions={"wolfgangsmith": 18, "novemberrevolution": 19},
                                            title_of=titles.__getitem__)
    retriever = ISORetriever(RetrievalGraph(edge_index, x, normalized=True, num_passages=20), torch.zeros(21),
                             ISOKnobs(alpha=0.0, entity_seeds=0.9, unique_mentions_vouched=vouched, **knobs), entity_matcher=matcher,
                             bridging=bridging)
    query = torch.zeros(1, 32)
    query[0, 0] = 1.0
    return retriever, Queries([QUESTION], query)


def _top2_and_mass(retriever: ISORetriever, queries: Queries) -> tuple[list[int], dict[int, float]]:
    result = retriever.retrieve(queries, k=2, trace=True)
    return result.indices[0].tolist(), result.traces[0]["ppr"]


def test_a_unique_mention_outside_the_dense_pool_seeds_only_the_passage_titled_with_it():
    trusted, trusted_mass = _top2_and_mass(*_far_unique_mentions(vouched=False))
    vouched, vouched_mass = _top2_and_mass(*_far_unique_mentions(vouched=True))
    assert set(trusted) == {18, 19}  # trusted: both far passages take the top 2
    assert vouched == [18, 0]  # the titled article keeps its seed; the other's share goes to the passage seeds
    assert vouched_mass[20] == pytest.approx(trusted_mass[20])  # the named entity node keeps its share
    assert vouched_mass[19] == 0.0 and vouched_mass[0] > trusted_mass[0]
    near, _ = _top2_and_mass(*_far_unique_mentions(vouched=True, near=True))
    assert set(near) == {18, 19}  # inside the dense pool a unique mention needs no title


def test_by_default_only_a_unique_mention_among_the_strongest_bridges_needs_a_voucher():
    bridging = torch.zeros(21)
    bridging[[5, 6, 19]] = torch.tensor([1.0, 2.0, 3.0])  # the only 3 of 20 passages above the rest: 19 among them, 18 not
    assert _top2_and_mass(*_far_unique_mentions(vouched=False, bridging=bridging))[0] == [18, 0]  # 19 gives its share back
    assert set(_top2_and_mass(*_far_unique_mentions(vouched=False, near=True, bridging=bridging))[0]) == {18, 19}  # in the pool
    assert set(_top2_and_mass(*_far_unique_mentions(vouched=False, bridging=bridging, vouch_share=0.0))[0]) == {18, 19}  # off
    untitled = lambda questions: [[18, 19, 20] for _ in questions]  # a matcher of its own, no titles
    assert _top2_and_mass(*_far_unique_mentions(vouched=False, matcher=untitled, bridging=bridging))[0] == [18, 0]  # 18 needs none
    # uniform φ ablates the bridging scores as it does the bridge cut: then nothing needs a voucher
    assert set(_top2_and_mass(*_far_unique_mentions(vouched=False, bridging=bridging, phi_mode="uniform"))[0]) == {18, 19}
    # a strong bridge titled with the name is vouched for by its title; with the knob every passage needs a voucher
    bridging[[5, 18]] = torch.tensor([0.0, 4.0])
    assert _top2_and_mass(*_far_unique_mentions(vouched=False, bridging=bridging))[0] == [18, 0]
    bridging[[18, 19]] = 0.0
    assert _top2_and_mass(*_far_unique_mentions(vouched=True, bridging=bridging))[0] == [18, 0]


def test_a_matcher_of_ones_own_is_vouched_for_by_the_dense_pool_alone():
    retriever, queries = _far_unique_mentions(vouched=True, matcher=lambda questions: [[18, 19, 20] for _ in questions])
    assert _top2_and_mass(retriever, queries)[0] == [0, 1]  # no titles to read: both far passages give their share back


def test_an_index_hands_its_titles_to_the_matcher_only_where_a_unique_mention_may_need_a_voucher():
    from isorag_pyg.datasets.types import Passage

    index = ISORAGIndex.build([*CORPUS, Passage("6", "Wolfgang Smith", "A mathematician from Aldania.")], f_theta=None, progress=False)
    assert index.unique_mentions.get("wolfgangsmith") == 6
    question = ["Where was Wolfgang Smith born?"]
    assert index.retriever("iso", unique_mentions_vouched=True).entity_matcher.titled_rows(question) == [{6}]
    assert index.retriever("iso").entity_matcher.titled_rows(question) == [{6}]  # the strongest bridges need one by default
    assert index.retriever("iso", vouch_share=0.0).entity_matcher.titled_rows(question) == [set()]
