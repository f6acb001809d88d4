"""The ablation multirun config and its aggregation script, run as a user would."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
         "dataset.generator.num_questions=20", "trainer.max_epochs=2", "encoder.show_progress=false"]


@pytest.mark.slow
def test_multirun_grid_and_aggregation(tmp_path):
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "evaluate.py", "-m", "hparams_search=ablation_grid", "retriever.beta=0.1,0.9",
           "retriever.over_retrieval=2", "retriever.phi_mode=real,uniform", f"hydra.sweep.dir={sweep}", *SMALL]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True)
    subprocess.run([sys.executable, "-m", "benchmarks.aggregate_ablation", str(sweep)], cwd=REPO, check=True, capture_output=True, text=True)
    rows = list(csv.DictReader((sweep / "ablation.csv").open()))
    assert {(r["beta"], r["phi_mode"]) for r in rows} == {("0.1", "real"), ("0.1", "uniform"), ("0.9", "real"), ("0.9", "uniform")}
    assert all(float(r["removed_edge_fraction"]) == 0.0 for r in rows if r["phi_mode"] == "uniform")
    removed = {r["beta"]: float(r["removed_edge_fraction"]) for r in rows if r["phi_mode"] == "real"}
    assert removed["0.9"] >= removed["0.1"]
    assert (sweep / "ablation.png").read_bytes()[:4] == b"\x89PNG"
    assert len(list(sweep.glob("*/f_theta"))) <= 1  # f_θ trained once, reused from the cache
