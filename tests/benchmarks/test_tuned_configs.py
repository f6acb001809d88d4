"""The per-dataset knobs tuned on the dev questions (benchmarks/tune_iso.py --split dev --grid round4)
are the ones recorded in conf/retriever/, and every recorded config runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from isorag_pyg.jobs.evaluate import run_evaluation
from isorag_pyg.knobs import ISOKnobs, PPRKnobs

REPO = Path(__file__).resolve().parents[2]
CONF = str(REPO / "conf")
TUNING = REPO / "benchmarks" / "results" / "tuning_round4_dev.json"
DATASETS = ["musique", "hotpotqa", "2wikimultihopqa"]


def retriever(name: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("eval", overrides=[f"retriever={name}", "paths.output_dir=."]).retriever


def phi_defaults():
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("eval", overrides=["paths.output_dir=."]).phi


@pytest.mark.parametrize("dataset", DATASETS)
def test_recorded_knobs_are_the_dev_tuning_winners(dataset):
    tuning = json.loads(TUNING.read_text())
    assert tuning["split"] == "dev" and "IN-SAMPLE" in tuning["protocol"]
    best = tuning["best_per_dataset"][dataset]
    iso_config, ppr_config = retriever(f"iso_dev_{dataset}"), retriever(f"ppr_dev_{dataset}")
    assert iso_config.kind == "iso" and ppr_config.kind == "ppr"
    # a knob the config leaves null is the index's (none stored on these graphs): the library's default;
    # φ's knobs are conf/phi's unless the retriever overrides them
    iso = {**ISOKnobs().to_dict(), **{k: v for k, v in iso_config.items() if v is not None}}
    ppr = {**PPRKnobs().to_dict(), **{k: v for k, v in ppr_config.items() if v is not None}}
    assert iso["phi_mode"] == "real"
    phi = phi_defaults()
    for key in tuning["grid"]:
        if key != "phi_mode":
            assert iso.get(key, phi.get(key)) == best["iso"][key], key
    for key in tuning["ppr_grid"]:
        assert ppr[key] == best["ppr"][key], key
    assert ppr["lambda_dense"] == pytest.approx(1.0 - ppr["lambda_graph"])


@pytest.mark.slow
def test_recorded_configs_run(tmp_path):
    names = [f"{kind}_dev_{dataset}" for dataset in DATASETS for kind in ("iso", "ppr")]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("eval", overrides=[f"paths.output_dir={tmp_path}", "dataset.generator.num_entities=60", "dataset.generator.num_hubs=2",
                                         "dataset.generator.hub_size=15", "dataset.generator.num_questions=10", "encoder.show_progress=false",
                                         "trainer.max_epochs=1", "traces=false", f"compare=[{','.join(names)}]"])
        summary = run_evaluation(cfg)
    assert set(summary["retrievers"]) == set(names)
    for name in names:
        assert 0.0 <= summary["retrievers"][name]["recall@5"] <= 1.0
    ran = summary["retrievers"]["iso_dev_musique"]["knobs"]  # what ran: the config's knobs, its φ override (p 1) included
    assert (ran["p"], ran["beta"], ran["hops"], ran["max_expansion"]) == (1.0, 0.01, 2, 30) and summary["phi"]["p"] == 0.0
