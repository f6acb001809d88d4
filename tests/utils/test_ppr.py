"""Batched power-iteration PPR against the dense closed form, and igraph's PageRank."""
from __future__ import annotations

import igraph as ig
import pytest
import torch
from conftest import DEVICES

from isorag_pyg.utils.ppr import personalized_pagerank


def closed_form(edge_index, n, r, alpha, follow=None):
    A = torch.zeros(n, n, dtype=torch.float64)
    F = torch.zeros(n, n, dtype=torch.float64)
    for (u, v), f in zip(edge_index.t().tolist(), [1.0] * edge_index.size(1) if follow is None else follow.tolist()):
        A[v, u] += 1.0
        F[v, u] += f
    out = A.sum(0)
    W = torch.where(out > 0, F / out.clamp_min(1), torch.zeros_like(A))
    restart = 1.0 - W.sum(0)  # a dangling node's column, and the share of every edge the walk does not follow, jump back through r
    M = W + r.unsqueeze(1) * restart.unsqueeze(0)
    return (1 - alpha) * torch.linalg.solve(torch.eye(n, dtype=torch.float64) - alpha * M, r)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(5))
def test_matches_closed_form_with_dangling_nodes(seed, device):
    gen = torch.Generator().manual_seed(seed)
    n = 12
    ei = torch.randint(0, n, (2, 25), generator=gen)
    ei = ei[:, ei[0] != ei[1]]
    r = torch.rand(n, generator=gen, dtype=torch.float64)
    r[torch.rand(n, generator=gen) < 0.5] = 0
    r[0] += 0.1
    r = r / r.sum()
    out = personalized_pagerank(ei.to(device), r.to(device), alpha=0.7, tol=1e-10, max_iter=1000)
    assert out.converged and out.pi.device.type == device
    assert torch.allclose(out.pi.squeeze(1).double().cpu(), closed_form(ei, n, r, 0.7), atol=1e-5)
    assert out.pi.sum().item() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("columns", [1, 2])
def test_an_edge_followed_in_part_sends_the_rest_back_through_the_teleport(columns, device):
    gen = torch.Generator().manual_seed(3)
    n = 10
    ei = torch.randint(0, n, (2, 30), generator=gen)
    ei = ei[:, ei[0] != ei[1]]
    follow = torch.rand(ei.size(1), generator=gen)
    follow[::3] = 1.0
    r = torch.rand(n, columns, generator=gen, dtype=torch.float64)
    r = r / r.sum(0)
    out = personalized_pagerank(ei.to(device), r.to(device), 0.8, tol=1e-12, max_iter=2000, edge_follow=follow.to(device))
    pi = out.pi.cpu()
    assert out.converged and torch.allclose(pi.sum(0), torch.ones(columns, dtype=torch.float64), rtol=0, atol=1e-6)
    for c in range(columns):
        assert torch.allclose(pi[:, c], closed_form(ei, n, r[:, c], 0.8, follow.double()), rtol=0, atol=1e-6)
    assert torch.equal(personalized_pagerank(ei, r, 0.8, tol=1e-12, max_iter=2000, edge_follow=torch.ones(ei.size(1))).pi,
                       personalized_pagerank(ei, r, 0.8, tol=1e-12, max_iter=2000).pi)
    for bad in (torch.ones(1), torch.full((ei.size(1),), 1.5), -follow):
        with pytest.raises(ValueError, match="edge_follow must hold one share in"):
            personalized_pagerank(ei, r, 0.8, edge_follow=bad)


def test_block_diagonal_batch_equals_separate_runs():
    g1 = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    g2 = torch.tensor([[0, 1], [1, 0]])
    r1, r2 = torch.tensor([1.0, 0, 0]), torch.tensor([0.25, 0.75])
    batched = personalized_pagerank(torch.cat([g1, g2 + 3], 1), torch.cat([r1, r2]), 0.6, batch=torch.tensor([0, 0, 0, 1, 1]), tol=1e-9)
    one = personalized_pagerank(g1, r1, 0.6, tol=1e-9).pi.squeeze(1)
    two = personalized_pagerank(g2, r2, 0.6, tol=1e-9).pi.squeeze(1)
    assert torch.allclose(batched.pi.squeeze(1), torch.cat([one, two]), atol=1e-6)
    sums = torch.zeros(2).index_add_(0, torch.tensor([0, 0, 0, 1, 1]), batched.pi.squeeze(1))
    assert torch.allclose(sums, torch.ones(2), atol=1e-6)


@pytest.mark.parametrize("columns", [1, 2])
def test_batch_with_dangling_nodes_matches_closed_form_per_graph(columns):
    # graph 0: 0 -> 1 -> 2 with 2 dangling; graph 1: 3 <-> 4 and 5 dangling (only reachable by teleport)
    ei = torch.tensor([[0, 1, 3, 4], [1, 2, 4, 3]])
    r = torch.tensor([[0.5, 0.5, 0.0, 0.2, 0.0, 0.8], [0.0, 0.0, 1.0, 0.0, 0.5, 0.5]], dtype=torch.float64).t()[:, :columns]
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    out = personalized_pagerank(ei, r, 0.7, batch=batch, tol=1e-12, max_iter=500)
    assert out.converged
    for c in range(columns):
        assert torch.allclose(out.pi[:3, c], closed_form(ei[:, :2], 3, r[:3, c], 0.7), atol=1e-9)
        assert torch.allclose(out.pi[3:, c], closed_form(ei[:, 2:] - 3, 3, r[3:, c], 0.7), atol=1e-9)


def test_unsorted_batch_is_rejected():
    with pytest.raises(ValueError, match="sorted"):
        personalized_pagerank(torch.tensor([[0], [1]]), torch.tensor([0.5, 0.5]), batch=torch.tensor([1, 0]))


def test_columns_are_independent_queries():
    ei = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 3]])
    r = torch.eye(4)[:, :2]
    both = personalized_pagerank(ei, r, 0.5, tol=1e-9).pi
    for c in range(2):
        assert torch.allclose(both[:, c], personalized_pagerank(ei, r[:, c], 0.5, tol=1e-9).pi.squeeze(1), atol=1e-6)


def test_matches_igraph_personalized_pagerank():
    g = ig.Graph.Barabasi(200, 3, directed=False)
    ei = torch.tensor(g.get_edgelist()).t()
    ei = torch.cat([ei, ei.flip(0)], 1)
    reset = torch.zeros(200, dtype=torch.float64)
    reset[[3, 50, 120]] = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    ref = torch.tensor(g.personalized_pagerank(damping=0.85, reset=reset.tolist()), dtype=torch.float64)
    got = personalized_pagerank(ei, reset, alpha=0.85, tol=1e-10, max_iter=500).pi.squeeze(1).double()
    assert torch.allclose(got, ref, atol=1e-5)


def test_iteration_cap_and_bad_alpha():
    ei = torch.tensor([[0, 1], [1, 0]])
    capped = personalized_pagerank(ei, torch.tensor([1.0, 0.0]), 0.9, tol=0.0, max_iter=3)
    assert capped.iterations == 3 and not capped.converged
    with pytest.raises(ValueError, match="alpha"):
        personalized_pagerank(ei, torch.tensor([1.0, 0.0]), alpha=1.0)


def test_empty_graph_returns_teleport():
    out = personalized_pagerank(torch.empty(2, 0, dtype=torch.long), torch.tensor([0.2, 0.8]), 0.5)
    assert torch.allclose(out.pi.squeeze(1), torch.tensor([0.2, 0.8]))
