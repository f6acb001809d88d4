"""Bridging scores: the leave-one-out change of φ that a node makes around it, checked against a
brute-force recomputation of φ without the node, in blocks of any size, and the share of passages
the walk leaves out."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import to_undirected

from isorag_pyg.utils.bridging import bridge_mask, bridging_score, profile_change
from isorag_pyg.utils.isoperimetric import log_isoperimetric_profile


def random_graph(n=40, e=90, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=gen)
    return to_undirected(ei[:, ei[0] != ei[1]], num_nodes=n)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_profile_change_is_phi_with_and_without_the_neighbour(p):
    n = 40
    edge_index = random_graph(n)
    log_vol = p * torch.rand(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    edges, delta = profile_change(edge_index, log_vol, shell_floor=2.0)
    with_all = log_isoperimetric_profile(edge_index, log_vol, shell_floor=2.0)
    for (u, x), d in zip(edges.t().tolist()[:60], delta.tolist()[:60]):
        keep = (edge_index[0] != x) & (edge_index[1] != x)  # the graph without x
        without = log_isoperimetric_profile(edge_index[:, keep], log_vol, shell_floor=2.0)
        assert d == pytest.approx(float(with_all[u] - without[u]), abs=1e-9)


def test_blocks_of_any_size_give_the_same_changes():
    edge_index = random_graph(60, 200)
    reference = profile_change(edge_index, torch.zeros(60))[1]
    for budget in (1, 7, 100):
        assert torch.allclose(profile_change(edge_index, torch.zeros(60), path_budget=budget)[1], reference)


def test_a_passage_tying_unrelated_regions_scores_highest():
    # ten small clusters (a passage and its two entities each); passage 40 names one entity of each cluster
    edges = []
    for c in range(10):
        passage, a, b = c, 10 + 2 * c, 11 + 2 * c
        edges += [(passage, a), (passage, b)]
    edges += [(40, 10 + 2 * c) for c in range(10)]
    scores = bridging_score(to_undirected(torch.tensor(edges).t()), torch.zeros(41))
    assert int(scores.argmax()) == 40
    assert bridging_score(torch.tensor([[0, 1], [1, 0]]), torch.zeros(3))[2] == float("-inf")  # no neighbour


def test_bridge_mask_leaves_out_the_highest_share_of_passages_only():
    scores = torch.tensor([0.1, 0.9, 0.2, 0.3, 0.5, 9.0])  # row 5 is not a passage
    assert bridge_mask(scores, 0.25, num_passages=5).tolist() == [False, True, False, False, False, False]
    assert not bridge_mask(torch.zeros(6), 0.5, num_passages=6).any()  # equal scores: none stands out
    assert not bridge_mask(scores, 0.0, num_passages=5).any()
    with pytest.raises(ValueError, match="share"):
        bridge_mask(scores, 1.0, num_passages=5)
