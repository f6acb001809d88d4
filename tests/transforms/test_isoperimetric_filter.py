"""IsoperimetricFilter as a PyG transform: exact kept edges, ablation modes, Compose, Batch."""
from __future__ import annotations

import pytest
import torch
import torch_geometric.transforms as T
from conftest import DEVICES
from torch_geometric.data import Batch, Data

from isorag_pyg.knobs import PhiSpec
from isorag_pyg.transforms import IsoperimetricFilter
from isorag_pyg.utils import (
    log_isoperimetric_profile,
    log_phi_from_ball,
    log_volume,
)

PATH = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])


def path_data(**kw) -> Data:
    return Data(edge_index=PATH.clone(), edge_attr=torch.arange(6.0), num_nodes=4, **kw)


def kept(data: Data) -> set[tuple[int, int]]:
    return set(map(tuple, data.edge_index.t().tolist()))


@pytest.mark.parametrize("device", DEVICES)
def test_from_ball_coordinates_matches_profile(device):
    z = torch.tensor([[0.1, 0.0], [0.5, 0.0], [0.0, 0.7], [0.0, 0.2]])
    data = path_data(z=z).to(device)
    out = IsoperimetricFilter(beta=0.6, p=2.0, shell_floor=0.0, phi_source="z")(data)
    lp = log_isoperimetric_profile(PATH, log_volume(z, 2.0), shell_floor=0.0)
    expected = {(u, v) for u, v in PATH.t().tolist() if min(lp[u], lp[v]) - max(lp[u], lp[v]) >= torch.log(torch.tensor(0.6))}
    assert kept(out) == expected
    assert out.num_removed_edges == 6 - len(expected)
    assert torch.allclose(out.log_phi.cpu(), lp) and out.phi.device.type == device


def test_shell_floor_makes_empty_shells_finite():
    z = torch.zeros(4, 2)  # every volume is 2**p
    data = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), z=z, num_nodes=4)  # node 3 isolated
    plain = IsoperimetricFilter(beta=0.1, p=3.0, shell_floor=0.0)(data)
    assert torch.isneginf(plain.log_phi[[1, 3]]).all()
    floored = IsoperimetricFilter(beta=0.1, p=3.0, shell_floor=1.0)(data)
    # node 1: empty shell + one origin volume over its closed set of three origin volumes
    assert floored.phi[1].item() == pytest.approx(1 / 3, rel=1e-6)
    assert floored.phi[0].item() == pytest.approx(2 / 2, rel=1e-6)  # shell {2} + floor over {0, 1}
    assert torch.isfinite(floored.log_phi).all()


def test_defaults_are_the_phi_spec_and_its_one_function():
    z = torch.tensor([[0.1, 0.0], [0.5, 0.0], [0.0, 0.7], [0.0, 0.2]])
    out = IsoperimetricFilter(beta=0.5)(path_data(z=z))
    assert torch.equal(out.log_phi, log_phi_from_ball(PATH, z, PhiSpec()))
    assert IsoperimetricFilter().spec == PhiSpec()


def test_precomputed_phi_and_aligned_edge_attributes():
    out = IsoperimetricFilter(beta=0.5, phi_source="phi")(path_data(phi=torch.tensor([1.0, 1.0, 0.4, 0.4])))
    assert kept(out) == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert out.edge_attr.tolist() == [0.0, 1.0, 4.0, 5.0]


def test_attributes_as_long_as_the_edge_list_but_not_named_edge_are_kept_whole():
    # 6 edges: PyG's own rule would cut a 6-entry list, and a 6-entry tensor on a 4-node graph, with the edges
    data = path_data(phi=torch.tensor([1.0, 1.0, 0.4, 0.4]), passage_id=list("abcdef"), seed_index=torch.arange(6), edge_type=torch.arange(6) % 2)
    out = IsoperimetricFilter(beta=0.5, phi_source="phi")(data)
    assert out.num_removed_edges == 2
    assert out.passage_id == list("abcdef") and out.seed_index.tolist() == list(range(6))
    assert out.edge_attr.tolist() == [0.0, 1.0, 4.0, 5.0] and out.edge_type.tolist() == [0, 1, 0, 1]  # edge-named: cut
    batch = Batch.from_data_list([data, path_data(phi=torch.ones(4), passage_id=list("ghijkl"), seed_index=torch.arange(6),
                                                  edge_type=torch.arange(6) % 2)])
    first, second = IsoperimetricFilter(beta=0.5, phi_source="phi")(batch).to_data_list()
    assert [g.edge_index.size(1) for g in batch.to_data_list()] == [6, 6] and "log_phi" not in batch  # the input batch is intact
    assert first.passage_id == list("abcdef") and second.passage_id == list("ghijkl")
    assert first.seed_index.tolist() == list(range(6)) and first.edge_attr.tolist() == [0.0, 1.0, 4.0, 5.0]
    assert second.edge_index.size(1) == 6 and second.edge_type.tolist() == [0, 1, 0, 1, 0, 1]


def test_callable_source_and_beta_extremes():
    phi = lambda data: torch.tensor([2.0, 2.0, 1.0, 3.0])
    assert kept(IsoperimetricFilter(beta=1.0, phi_source=phi)(path_data())) == {(0, 1), (1, 0)}
    assert kept(IsoperimetricFilter(beta=1e-9, phi_source=phi)(path_data())) == set(map(tuple, PATH.t().tolist()))


def test_input_not_modified():
    data = path_data(phi=torch.tensor([1.0, 1.0, 0.1, 0.1]))
    IsoperimetricFilter(beta=0.5, phi_source="phi")(data)
    assert data.edge_index.size(1) == 6 and "log_phi" not in data


def test_ablation_modes():
    data = path_data(phi=torch.tensor([1.0, 0.9, 0.1, 0.01]))
    assert IsoperimetricFilter(beta=1.0, phi_source="phi", phi_mode="uniform")(data).num_removed_edges == 0
    shuffled = IsoperimetricFilter(beta=0.5, phi_source="phi", phi_mode="shuffled", seed=1)(data)
    assert sorted(shuffled.phi.tolist()) == pytest.approx(sorted([1.0, 0.9, 0.1, 0.01]))
    again = IsoperimetricFilter(beta=0.5, phi_source="phi", phi_mode="shuffled", seed=1)(data)
    assert torch.equal(shuffled.phi, again.phi)
    rnd = IsoperimetricFilter(beta=0.5, phi_source="phi", phi_mode="random", seed=3)(data)
    assert ((rnd.phi > 0) & (rnd.phi < 1)).all()
    assert torch.equal(rnd.phi, IsoperimetricFilter(beta=0.5, phi_source="phi", phi_mode="random", seed=3)(data).phi)
    assert not torch.equal(rnd.phi, IsoperimetricFilter(beta=0.5, phi_source="phi", phi_mode="random", seed=4)(data).phi)


def test_compose_and_batch():
    g1 = path_data(phi=torch.tensor([1.0, 1.0, 0.1, 0.1]))
    g2 = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), edge_attr=torch.tensor([10.0, 11, 12, 13]),
              phi=torch.tensor([0.2, 1.0, 1.0]), num_nodes=3)
    batch = Batch.from_data_list([g1, g2])
    out = T.Compose([IsoperimetricFilter(beta=0.5, phi_source="phi")])(batch)
    assert out.num_removed_edges == 4
    first, second = out.to_data_list()
    assert kept(first) == {(0, 1), (1, 0), (2, 3), (3, 2)} and first.edge_attr.tolist() == [0.0, 1.0, 4.0, 5.0]
    assert kept(second) == {(1, 2), (2, 1)} and second.edge_attr.tolist() == [12.0, 13.0]
    assert second.phi.tolist() == pytest.approx([0.2, 1.0, 1.0])


def test_empty_graph():
    out = IsoperimetricFilter(phi_source="z")(Data(edge_index=torch.empty(2, 0, dtype=torch.long), z=torch.zeros(0, 2), num_nodes=0))
    assert out.edge_index.shape == (2, 0) and out.num_removed_edges == 0


def test_repr():
    assert repr(IsoperimetricFilter(beta=0.3, p=4.0)) == "IsoperimetricFilter(beta=0.3, p=4.0, phi_source='z', phi_mode='real')"


@pytest.mark.parametrize(
    "kwargs,match",
    [({"beta": 0.0}, "beta"), ({"beta": 1.2}, "beta"), ({"phi_mode": "bogus"}, "phi_mode"), ({"phi_source": "x"}, "phi_source"), ({"eps": 0}, "eps"),
     ({"shell_floor": -1.0}, "shell_floor")],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        IsoperimetricFilter(**kwargs)


def test_missing_attributes():
    with pytest.raises(ValueError, match="data.z"):
        IsoperimetricFilter(phi_source="z", p=1.0)(path_data())
    counted = IsoperimetricFilter(phi_source="z", p=0.0, shell_floor=0.0)(path_data())  # p = 0 counts nodes: no coordinates needed
    assert torch.allclose(counted.phi, torch.tensor([0.5, 1 / 3, 1 / 3, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="log_phi"):
        IsoperimetricFilter(phi_source="phi")(path_data())
    with pytest.raises(ValueError, match="3 values for 4 nodes"):
        IsoperimetricFilter(phi_source="phi")(path_data(phi=torch.ones(3)))
