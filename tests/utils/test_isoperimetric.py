"""φ against a brute-force reference, exact kept-edge sets, and numerical edge cases."""
from __future__ import annotations

import math

import pytest
import torch
from conftest import DEVICES
from hypothesis import given, settings
from hypothesis import strategies as st

from isorag_pyg.knobs import PhiSpec
from isorag_pyg.utils import (
    ablate_log_phi,
    isoperimetric_keep_mask,
    log_conformal_factor,
    log_isoperimetric_profile,
    log_phi_from_ball,
    log_volume,
    origin_volume,
)


def brute_force_phi(n: int, edges: list[tuple[int, int]], vol: list[float], eps: float, shell_floor: float = 0.0) -> list[float]:
    nbrs = {u: set() for u in range(n)}
    for u, v in edges:
        if u != v:
            nbrs[u].add(v)
    out = []
    for u in range(n):
        closed = {u} | nbrs[u]
        shell = {w for v in nbrs[u] for w in nbrs[v]} - closed
        out.append((sum(vol[w] for w in shell) + shell_floor) / (sum(vol[w] for w in closed) + eps))
    return out


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 12))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))
    directed = draw(st.booleans())
    edges = pairs if directed else pairs + [(v, u) for u, v in pairs]
    vol = draw(st.lists(st.floats(0.1, 10.0), min_size=n, max_size=n))
    budget = draw(st.sampled_from([1, 3, 1 << 24]))
    shell_floor = draw(st.sampled_from([0.0, 0.5]))
    return n, edges, vol, budget, shell_floor


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_matches_brute_force(graph):
    n, edges, vol, budget, shell_floor = graph
    ei = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    log_vol = torch.tensor(vol, dtype=torch.float64).log()
    got = log_isoperimetric_profile(ei, log_vol, eps=1e-3, shell_floor=shell_floor, path_budget=budget).exp()
    want = torch.tensor(brute_force_phi(n, edges, vol, 1e-3, shell_floor), dtype=torch.float64)
    assert torch.allclose(got, want, rtol=1e-9, atol=1e-12)


def test_shell_counts_distinct_nodes_not_paths():
    # 0 reaches 3 through both 1 and 2: the shell {3} is counted once
    ei = torch.tensor([[0, 0, 1, 2, 1, 2, 3, 3], [1, 2, 3, 3, 0, 0, 1, 2]])
    phi = log_isoperimetric_profile(ei, torch.zeros(4), shell_floor=0.0).exp()
    assert phi[0].item() == pytest.approx(1 / 3)


def test_self_loops_and_duplicates_are_ignored():
    base = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    noisy = torch.cat([base, base, torch.tensor([[0, 1, 2], [0, 1, 2]])], dim=1)
    lv = torch.tensor([0.1, 0.2, 0.3])
    assert torch.equal(log_isoperimetric_profile(base, lv, shell_floor=0.0), log_isoperimetric_profile(noisy, lv, shell_floor=0.0))


def test_isolated_nodes_and_empty_graph():
    lp = log_isoperimetric_profile(torch.empty(2, 0, dtype=torch.long), torch.zeros(3), shell_floor=0.0)
    assert torch.isneginf(lp).all()
    lp = log_isoperimetric_profile(torch.tensor([[0, 1], [1, 0]]), torch.zeros(4), shell_floor=0.0)
    assert torch.isneginf(lp).all()  # a lone edge has no 2-hop shell either
    assert log_isoperimetric_profile(torch.empty(2, 0, dtype=torch.long), torch.zeros(0), shell_floor=0.0).numel() == 0


def test_no_overflow_at_p64_near_the_boundary():
    z = torch.zeros(4, 2)
    z[:, 0] = torch.tensor([0.999999, 0.5, 0.0, 0.9999999])
    lv = log_volume(z, p=64.0)
    assert torch.isfinite(lv).all() and lv.max() > 64 * 10  # λ^64 itself would be ~1e440
    ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    lp = log_isoperimetric_profile(ei, lv, shell_floor=0.0)
    assert torch.isfinite(lp).all()
    keep = isoperimetric_keep_mask(ei, lp, 0.5)
    assert keep.dtype == torch.bool and keep.numel() == 6


def test_conformal_factor_values():
    z = torch.tensor([[0.0, 0.0], [0.6, 0.0]])
    assert torch.allclose(log_conformal_factor(z).exp(), torch.tensor([2.0, 2 / 0.64], dtype=torch.float64))
    assert torch.allclose(log_conformal_factor(z, c=2.0).exp()[1], torch.tensor(2 / (1 - 0.72), dtype=torch.float64))
    boundary = torch.tensor([[1.0, 0.0]])
    assert torch.isfinite(log_conformal_factor(boundary)).all()


def test_keep_mask_exact_sets():
    # path 0-1-2-3 with chosen profiles
    ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    phi = torch.tensor([1.0, 0.8, 0.3, 0.3])
    lp = phi.double().log()
    kept = lambda beta: set(map(tuple, ei[:, isoperimetric_keep_mask(ei, lp, beta)].t().tolist()))
    assert kept(1.0) == {(2, 3), (3, 2)}  # β = 1 keeps only equal profiles
    assert kept(0.8) == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert kept(0.375) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}
    assert kept(0.37) == kept(0.375)
    assert kept(0.38) == kept(0.8)
    assert kept(1e-12) == set(map(tuple, ei.t().tolist()))  # β -> 0 keeps everything


def test_zero_profiles_count_as_equal():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    lp = torch.tensor([float("-inf"), float("-inf"), 0.0], dtype=torch.float64)
    assert isoperimetric_keep_mask(ei, lp, 1.0).tolist() == [True, True, False, False]


@pytest.mark.parametrize("beta", [0.0, -0.1, 1.5, math.nan])
def test_beta_outside_unit_interval(beta):
    with pytest.raises(ValueError, match="beta"):
        isoperimetric_keep_mask(torch.tensor([[0], [1]]), torch.zeros(2), beta)


def test_bad_inputs():
    with pytest.raises(ValueError, match="eps"):
        log_isoperimetric_profile(torch.tensor([[0], [1]]), torch.zeros(2), eps=0, shell_floor=0.0)
    with pytest.raises(ValueError, match="shell_floor"):
        log_isoperimetric_profile(torch.tensor([[0], [1]]), torch.zeros(2), shell_floor=-1.0)
    with pytest.raises(ValueError, match="refers to node"):
        log_isoperimetric_profile(torch.tensor([[0], [5]]), torch.zeros(2), shell_floor=0.0)
    for p in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="volume exponent"):
            log_volume(torch.zeros(2, 3), p)


def test_p_zero_counts_nodes():
    z = torch.tensor([[0.0, 0.0], [0.9, 0.0], [0.0, 0.5]])
    assert log_volume(z, 0.0).tolist() == [0.0, 0.0, 0.0]
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0 - 1 - 2: φ = |shell| / |closed set|
    assert torch.allclose(log_isoperimetric_profile(ei, log_volume(z, 0.0), shell_floor=0.0).exp(), torch.tensor([0.5, 0.0, 0.5], dtype=torch.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_every_device_matches_reference(device):
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 60, (2, 300), generator=gen)
    vol = torch.rand(60, generator=gen, dtype=torch.float64) + 0.5
    got = log_isoperimetric_profile(ei.to(device), vol.log().to(device), eps=1e-3, path_budget=50, shell_floor=0.0)
    assert got.device.type == device
    want = brute_force_phi(60, ei.t().tolist(), vol.tolist(), 1e-3)
    assert torch.allclose(got.exp().cpu(), torch.tensor(want, dtype=torch.float64), rtol=1e-9)


def test_phi_spec_is_one_recipe_with_checked_fields():
    z = torch.tensor([[0.1, 0.0], [0.5, 0.2], [0.0, 0.7]])
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    spec = PhiSpec(p=2.0, eps=1e-6, shell_floor=3.0, curvature=0.5)
    want = log_isoperimetric_profile(ei, log_volume(z, 2.0, 0.5), eps=1e-6, shell_floor=3.0, floor_unit=origin_volume(2.0))
    assert torch.equal(log_phi_from_ball(ei, z, spec), want)
    assert torch.equal(log_phi_from_ball(ei, None, PhiSpec(p=0.0), num_nodes=3), log_phi_from_ball(ei, z, PhiSpec(p=0.0)))
    with pytest.raises(ValueError, match="needs ball coordinates"):
        log_phi_from_ball(ei, None, PhiSpec(p=1.0), num_nodes=3)
    with pytest.raises(ValueError, match="3 rows for 4 nodes"):
        log_phi_from_ball(ei, z, spec, num_nodes=4)
    for bad, match in (({"p": -1.0}, "exponent"), ({"eps": 0.0}, "eps"), ({"shell_floor": -1.0}, "shell_floor"), ({"curvature": 0.0}, "curvature")):
        with pytest.raises(ValueError, match=match):
            PhiSpec(**bad)
    assert spec.replace(p=0.0) == PhiSpec(p=0.0, eps=1e-6, shell_floor=3.0, curvature=0.5) and not PhiSpec(p=0.0).needs_coordinates


def test_ablations_are_a_pure_seeded_function():
    log_phi = torch.tensor([-1.0, -2.0, -3.0, -4.0], dtype=torch.float64)
    assert torch.equal(ablate_log_phi(log_phi, "real"), log_phi)
    assert torch.equal(ablate_log_phi(log_phi, "uniform"), torch.zeros(4, dtype=torch.float64))
    shuffled = ablate_log_phi(log_phi, "shuffled", seed=3)
    assert sorted(shuffled.tolist()) == sorted(log_phi.tolist()) and torch.equal(shuffled, ablate_log_phi(log_phi, "shuffled", seed=3))
    random = ablate_log_phi(log_phi, "random", seed=1)
    assert (random <= 0).all() and torch.equal(random, ablate_log_phi(log_phi, "random", seed=1))
    assert not torch.equal(random, ablate_log_phi(log_phi, "random", seed=2))
    with pytest.raises(ValueError, match="phi mode"):
        ablate_log_phi(log_phi, "bogus")
