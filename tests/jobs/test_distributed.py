"""DDP on CPU (2 processes, gloo): train.py and sharded evaluate.py, run as a user runs them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from isorag_pyg.index import ISORAGIndex
from isorag_pyg.jobs.evaluate import sharded_timing
from isorag_pyg.retrieval import DenseRetriever, Queries, RetrievalGraph
from isorag_pyg.utils.device import device_of

REPO = Path(__file__).resolve().parents[2]
SMALL = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
         "dataset.generator.num_questions=21", "encoder.show_progress=false"]  # 21 questions: shards of 11 and 10


def run_script(script: str, out_dir: Path, *overrides: str) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, script, *SMALL, *overrides, f"hydra.run.dir={out_dir}"], check=False, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_sharded_evaluation_gives_single_process_metrics(tmp_path):
    common = ["trainer.max_epochs=2", "traces=false", "compare=[iso,dense,bm25,ppr,iso_shuffled]"]
    run_script("evaluate.py", tmp_path / "one", *common)
    run_script("evaluate.py", tmp_path / "two", *common, "sharding.devices=2")
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert two["sharding_devices"] == 2 and two["n_questions"] == one["n_questions"] == 21
    for name, metrics in one["retrievers"].items():
        latency = metrics.pop("latency_ms_per_query")
        other = dict(two["retrievers"][name])
        assert other.pop("latency_ms_per_query") > 0 and latency > 0
        assert other == metrics, name  # recall, precision, pruned share, candidates: identical
    assert (tmp_path / "two" / "train_ddp_process_1.log").is_file()  # rank 1 really ran


@pytest.mark.slow
def test_ddp_training_validates_on_all_nodes_and_writes_once(tmp_path):
    common = ["trainer.max_epochs=2", "logger=csv", "trainer.enable_progress_bar=false"]
    run_script("train.py", tmp_path / "one", *common, "trainer=cpu")
    run_script("train.py", tmp_path / "two", *common, "trainer=ddp")
    one = json.loads((tmp_path / "one" / "train_metrics.json").read_text())
    two = json.loads((tmp_path / "two" / "train_metrics.json").read_text())
    # the same seeded initial weights, validated over every node gathered from both ranks
    assert two["val/triplet_acc_untrained"] == one["val/triplet_acc_untrained"]
    assert two["val/triplet_acc_cosine_baseline"] == one["val/triplet_acc_cosine_baseline"]
    index = ISORAGIndex.load(tmp_path / "two" / "index")  # written once, by rank 0
    assert index.z.shape[0] == one["graph/nodes"] and (index.z.norm(dim=-1) < 1).all()
    ckpt = torch.load(tmp_path / "two" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["epoch"] == 1 and ckpt["global_step"] > 0


def test_fewer_questions_than_ranks_runs_in_one_process(caplog):
    x = torch.nn.functional.normalize(torch.randn(8, 4), dim=-1)
    retriever = DenseRetriever(RetrievalGraph(torch.empty(2, 0, dtype=torch.long), x))
    queries = Queries(["q"], x[:1])
    timed = sharded_timing(OmegaConf.create({"devices": 2, "accelerator": "cpu", "strategy": "ddp"}))
    result, seconds = timed(retriever, queries, 3)
    assert result.indices[0, 0] == 0 and seconds >= 0
    assert "one process" in caplog.text
    with pytest.raises(ValueError, match="sharding.devices"):
        sharded_timing(OmegaConf.create({"devices": 0, "accelerator": "cpu", "strategy": "ddp"}))


def test_auto_device_gives_each_local_rank_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert device_of("auto") == torch.device("cuda", 0)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert device_of(None) == torch.device("cuda", 1)
    monkeypatch.setenv("LOCAL_RANK", "3")  # more ranks than visible GPUs: they share, round robin
    assert device_of("auto") == torch.device("cuda", 1)
    assert device_of("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_of("auto") == torch.device("cpu")
