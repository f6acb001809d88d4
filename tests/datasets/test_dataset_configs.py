"""The named dataset configs point at real files and load through the jobs' config layer."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from isorag_pyg.datasets import train_eval_overlap
from isorag_pyg.jobs.config import dataset_splits as load_dataset_splits

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def dataset_cfg(name: str, *overrides: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("train", overrides=[f"dataset={name}", "paths.output_dir=.", *overrides]).dataset


@pytest.mark.shared_data
@pytest.mark.parametrize("name,n_eval,n_train", [("musique", 100, 100), ("hotpotqa", 200, 100), ("2wikimultihopqa", 1000, 500)])
def test_named_configs_load(shared_data, name, n_eval, n_train):
    eval_ds, train_ds = load_dataset_splits(dataset_cfg(name, f"dataset.data_dir={shared_data}"))
    assert len(eval_ds.questions) == n_eval and len(train_ds.questions) == n_train
    assert eval_ds.name == name
    assert train_eval_overlap(eval_ds, train_ds) == 0


def test_missing_data_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset.download=true"):
        load_dataset_splits(dataset_cfg("musique", f"dataset.data_dir={tmp_path}"))


def test_synthetic_config_gives_both_splits():
    eval_ds, train_ds = load_dataset_splits(dataset_cfg("synthetic"))
    assert eval_ds.name == "synthetic-dev" and train_ds.name == "synthetic-train"
    assert eval_ds.corpus == train_ds.corpus and train_eval_overlap(eval_ds, train_ds) == 0
