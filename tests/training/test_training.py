"""f_θ: the module alone, and train.py's job composed from the real hydra configs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from isorag_pyg.index import ISORAGIndex
from isorag_pyg.jobs.train import INDEX_DIR, run_training
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.nn import PoincareEncoder, degree_target_radius
from isorag_pyg.utils import log_phi_from_ball

CONF = str(Path(__file__).resolve().parents[2] / "conf")
QUIET = ["logger=csv", "trainer.enable_progress_bar=false", "encoder.show_progress=false"]
SMALL = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
         "dataset.generator.num_questions=20"]


def compose_train(tmp_path, *overrides, small=True):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("train", overrides=[f"paths.output_dir={tmp_path}", *QUIET, *(SMALL if small else []), *overrides])


def test_poincare_encoder_stays_in_ball():
    enc = PoincareEncoder(4, out_dim=3, hidden_dim=None, curvature=2.0)
    z = enc(torch.randn(50, 4) * 100)
    assert (z.norm(dim=-1) < 1 / 2**0.5).all()
    assert enc.embed_all(torch.zeros(0, 4)).shape == (0, 3)
    with pytest.raises(ValueError, match="size 4"):
        enc(torch.randn(2, 5))
    with pytest.raises(ValueError, match="curvature"):
        PoincareEncoder(4, curvature=0)


def test_degree_target_radius_orders_hubs_inside():
    r = degree_target_radius(torch.tensor([0.0, 1.0, 10.0, 100.0]))
    assert r[0] == pytest.approx(0.9) and r[-1] == pytest.approx(0.1)
    assert (r[1:] < r[:-1]).all()


def test_fast_dev_run_writes_the_index(tmp_path):
    cfg = compose_train(tmp_path, "+trainer.fast_dev_run=true")
    metrics = run_training(cfg)
    assert 0.0 <= metrics["val/triplet_acc"] <= 1.0
    index = ISORAGIndex.load(tmp_path / INDEX_DIR)
    assert index.z.shape[0] == len(index) == metrics["graph/nodes"]
    assert (index.z.norm(dim=-1) < 1).all() and index.phi == PhiSpec(**cfg.phi)
    # the saved φ is the one retrieval uses: recomputed from the saved coordinates, it is the same
    assert torch.equal(index.log_phi, log_phi_from_ball(index.graph.edge_index, index.z, index.phi))
    assert index.f_theta_info["metrics"]["val/triplet_acc"] == metrics["val/triplet_acc"]
    assert torch.allclose(index.f_theta.embed_all(index.embeddings), index.z, atol=1e-6)  # f_θ's weights are saved too
    assert json.loads((tmp_path / "train_metrics.json").read_text())["leak"] is False


@pytest.mark.slow
def test_training_learns_geometry_and_resumes(tmp_path):
    cfg = compose_train(tmp_path, "trainer.max_epochs=15", "graph=leakfree", small=False)  # the embedded default corpus
    metrics = run_training(cfg)
    assert metrics["val/triplet_acc"] > metrics["val/triplet_acc_untrained"] + 0.05
    assert metrics["spearman_degree_norm"] < -0.3  # hubs near the origin
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert last.is_file() and (tmp_path / INDEX_DIR / "manifest.json").is_file()
    resumed = run_training(compose_train(tmp_path / "resumed", "trainer.max_epochs=17", "graph=leakfree", f"ckpt_path={last}", small=False))
    ckpt = torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["epoch"] == 16  # continued from epoch 15, not restarted
    assert resumed["val/triplet_acc"] > metrics["val/triplet_acc_untrained"]


def test_seeded_runs_are_identical(tmp_path):
    a = run_training(compose_train(tmp_path / "a", "trainer.max_epochs=2", "logger=none"))
    b = run_training(compose_train(tmp_path / "b", "trainer.max_epochs=2", "logger=none"))
    za = ISORAGIndex.load(tmp_path / "a" / INDEX_DIR).z
    zb = ISORAGIndex.load(tmp_path / "b" / INDEX_DIR).z
    assert torch.equal(za, zb) and a["val/triplet_acc"] == b["val/triplet_acc"]


def test_hard_negatives_and_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    cfg = compose_train(tmp_path, "trainer.max_epochs=1", "model.hard_negatives=true", "data.num_negatives=4", "logger=wandb")
    assert run_training(cfg)["val/triplet_acc"] >= 0.0
    assert list(tmp_path.rglob("offline-run-*"))


def test_datamodule_rejects_bad_graphs():
    from torch_geometric.data import Data

    from isorag_pyg.training import GraphTripletDataModule

    ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    with pytest.raises(ValueError, match="NaN"):
        GraphTripletDataModule(Data(x=torch.full((4, 2), float("nan")), edge_index=ei)).setup()
    with pytest.raises(ValueError, match="no edges"):
        GraphTripletDataModule(Data(x=torch.randn(4, 2), edge_index=torch.empty(2, 0, dtype=torch.long))).setup()
    with pytest.raises(ValueError, match="too few"):
        GraphTripletDataModule(Data(x=torch.randn(2, 2), edge_index=torch.tensor([[0, 1], [1, 0]]))).setup()
    with pytest.raises(ValueError, match="val_fraction"):
        GraphTripletDataModule(Data(x=torch.randn(4, 2), edge_index=ei), val_fraction=0.0)
