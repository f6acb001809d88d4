"""The noise benchmark (``python -m benchmarks.noise``) run as a user would on a small synthetic corpus (JSON and plot go to a
temporary folder), and its β rule on graphs with a known answer."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_benchmark_scripts import SMALL
from torch_geometric.utils import to_undirected

from benchmarks.noise import beta_rule
from isorag_pyg.utils.isoperimetric import log_isoperimetric_profile

REPO = Path(__file__).resolve().parents[2]


def noise_script(tmp_path: Path, *args: str) -> str:
    overrides = [arg for override in SMALL for arg in ("--override", override)]
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.noise", "--datasets", "synthetic", *args, *overrides],
                          cwd=REPO, env=env, check=True, capture_output=True, text=True)
    return done.stdout


@pytest.mark.slow
def test_noise_benchmark_tunes_on_training_questions_per_level(tmp_path):
    levels = ["clean", "hub-2.5%x150", "random-1x", "comention", "rich-weighted"]
    out = noise_script(tmp_path, "--levels", *levels)
    assert "won back" in out and "target" in out
    payload = json.loads((tmp_path / "noise.json").read_text())
    assert (tmp_path / "noise.png").is_file()
    assert "training questions" in payload["protocol"] and list(payload["levels"]) == levels
    results = {r["level"]: r for r in payload["results"]}
    grid = payload["train_settings"]
    for row in results.values():
        assert row["n_dev_questions"] == 20 and row["n_train_questions"] == 20
        for family, knobs in row["tuned_knobs"].items():
            assert knobs in grid[family]  # every choice comes from the training grid
        for label in ("dense", "ppr (tuned)", "iso_p1 (tuned)", "iso_p0 (tuned)", "iso_uniform (tuned)", "iso_shuffled (tuned)",
                      "iso_random (tuned)", "ppr (fixed)", "iso_p1 (fixed)", "iso (robust default)", "iso (beta rule)"):
            assert 0.0 <= row["metrics"][label]["recall@5"] <= row["metrics"][label]["recall@10"] <= 1.0
        assert 0.01 <= row["beta_rule_dev"]["beta"] <= 0.6
    # the noise is recorded in the graph statistics, on the training and the dev graph alike
    hub = results["hub-2.5%x150"]
    for graph in (hub["graph_train"], hub["graph_dev"]):
        assert graph["noise_hub_degree"] == min(150, graph["nodes"] - 1) and graph["noise_hubs"] == round(0.025 * graph["nodes"]) and graph["noise_seed"] == 0
    assert results["random-1x"]["graph_dev"]["noise_random_edges"] == results["clean"]["graph_dev"]["edges"]
    assert "noise_hubs" not in results["clean"]["graph_dev"] and results["comention"]["graph_dev"]["edge_share_entity_comention"] == 1.0
    assert results["rich-weighted"]["retriever_knobs"] == {"edge_weights": True}
    robust = payload["robust_default"]
    assert robust["knobs"] in grid["iso_p1"] + grid["iso_p0"] and robust["clean_cost_vs_uniform"] <= 0.005 + 1e-9
    won = payload["summary"]["won_back"]["synthetic/hub-2.5%x150"]["tuned"]
    noisy, clean = hub["metrics"], results["clean"]["metrics"]
    assert won["ppr_loss"] == pytest.approx(clean["ppr (tuned)"]["recall@5"] - noisy["ppr (tuned)"]["recall@5"])
    assert set(payload["summary"]["targets"]) == {"synthetic/fixed", "synthetic/robust", "synthetic/tuned", "synthetic/tuned_p0"}


@pytest.mark.slow
def test_noise_benchmark_stages_give_the_same_numbers(tmp_path):
    levels = ["clean", "hub-1%x50"]
    noise_script(tmp_path, "--levels", *levels)
    whole = json.loads((tmp_path / "noise.json").read_text())
    noise_script(tmp_path, "--stage", "train", "--levels", "clean")
    noise_script(tmp_path, "--stage", "train", "--levels", "hub-1%x50")  # added to the same training file
    assert set(json.loads((tmp_path / "noise_train_synthetic.json").read_text())["levels"]) == set(levels)
    noise_script(tmp_path, "--stage", "dev", "--levels", *levels)
    noise_script(tmp_path, "--stage", "report", "--levels", *levels)
    staged = json.loads((tmp_path / "noise.json").read_text())
    assert staged["robust_default"]["knobs"] == whole["robust_default"]["knobs"]
    assert [r["metrics"] for r in staged["results"]] == [r["metrics"] for r in whole["results"]]
    done = subprocess.run([sys.executable, "-m", "benchmarks.noise", "--datasets", "synthetic", "--stage", "dev", "--levels", "random-3x"],
                          check=False, cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, capture_output=True, text=True)
    assert done.returncode != 0 and "without levels ['random-3x']" in done.stderr


def test_beta_rule_separates_hub_edges_from_clean_ones():
    # a clean ring of 60 passages, then 3 hubs each linked to 15 random passages
    n = 63
    ring = torch.stack([torch.arange(60), (torch.arange(60) + 1) % 60])
    gen = torch.Generator().manual_seed(0)
    spokes = torch.cat([torch.stack([torch.full((15,), 60 + h), torch.randperm(60, generator=gen)[:15]]) for h in range(3)], 1)
    clean, noisy = to_undirected(ring, num_nodes=n), to_undirected(torch.cat([ring, spokes], 1), num_nodes=n)
    floor = torch.zeros(n)
    assert beta_rule(clean, log_isoperimetric_profile(clean, floor, shell_floor=8.0))["beta"] == 0.01  # every profile equal: prune nothing
    log_phi = log_isoperimetric_profile(noisy, floor, shell_floor=8.0)
    rule = beta_rule(noisy, log_phi)
    hub_edge = (noisy >= 60).any(0)
    ratio = torch.exp(-(log_phi[noisy[0]] - log_phi[noisy[1]]).abs())
    pruned = ratio < rule["beta"]
    assert 0.01 < rule["beta"] <= 0.6 and 0.0 < rule["separation"] <= 1.0
    assert pruned[hub_edge].float().mean() > 0.9 and pruned[~hub_edge].float().mean() < pruned[hub_edge].float().mean()
    assert math.isclose(beta_rule(torch.empty(2, 0, dtype=torch.long), torch.zeros(3))["beta"], 0.01)
