"""The tuning and quality benchmarks behind the README's tables, run as a user would on a small
synthetic corpus (their JSON goes to a temporary folder, not benchmarks/results/)."""
from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
         "dataset.generator.num_questions=20", "trainer.max_epochs=2"]


def run_script(tmp_path: Path, script: str, *args: str) -> str:
    overrides = [arg for override in SMALL for arg in ("--override", override)]
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{script}", "--datasets", "synthetic", *args, *overrides],
                          cwd=REPO, env=env, check=True, capture_output=True, text=True)
    return done.stdout


@pytest.mark.slow
def test_tuning_on_dev_then_quality_with_the_tuned_knobs(tmp_path):
    out = run_script(tmp_path, "tune_iso", "--split", "dev", "--grid", "round3")
    assert "held-out" in out
    tuning = json.loads((tmp_path / "tuning_round3_dev.json").read_text())
    assert tuning["split"] == "dev" and "IN-SAMPLE" in tuning["protocol"]
    rows = tuning["rows"]
    iso_real = [r for r in rows if r["retriever"] == "iso" and r["phi_mode"] == "real"]
    assert len(iso_real) == 2 * 2 * 2 * 2 * 4 and len([r for r in rows if r["retriever"] == "ppr"]) == 6
    assert len([r for r in rows if r["retriever"] == "iso" and r["phi_mode"] == "uniform"]) == 2 * 2 * 2 * 2  # one β each
    best = tuning["best_per_dataset"]["synthetic"]
    assert best["iso"]["recall@5"] == max(r["recall@5"] for r in iso_real)
    cv = tuning["cross_validation"]["synthetic/title_mention"]
    assert set(cv) == {"iso", "iso_uniform", "ppr"}
    assert cv["iso"]["in_sample"] == pytest.approx(best["iso"]["recall@5"], abs=1e-6)  # float64 mean of the per-question values
    assert 0.0 <= cv["iso"]["held_out"] <= 1.0

    run_script(tmp_path, "quality", "--graphs", "title_mention", "--per-dataset-knobs", str(tmp_path / "tuning_round3_dev.json"),
               "--ablation-seeds", "2")
    quality = json.loads((tmp_path / "quality_tuning_round3_dev.json").read_text())
    assert "IN-SAMPLE" in quality["knobs"]
    (result,) = quality["results"]
    assert set(result["metrics"]) == {"iso", "iso_no_bridges", "dense", "bm25", "ppr", "hipporag", "iso_uniform", "iso_shuffled",
                                      "iso_shuffled_seed1", "iso_random", "iso_random_seed1", "iso_p0"}
    # the tuned setting gives the same Recall@5 when quality.py runs it again
    assert result["metrics"]["iso"]["recall@5"] == best["iso"]["recall@5"]
    ablations = ["iso_uniform", "iso_shuffled", "iso_shuffled_seed1", "iso_random", "iso_random_seed1"]
    assert result["real_phi_beats_ablations_r5"] == all(result["metrics"]["iso"]["recall@5"] > result["metrics"][a]["recall@5"] for a in ablations)


def quality_error(tmp_path: Path, *args: str) -> str:
    """quality.py's stderr for arguments it must refuse (it must exit non-zero)."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.quality", "--datasets", "synthetic", *args],
                          check=False, cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, capture_output=True, text=True)
    assert done.returncode != 0, done.stdout[-500:]
    return done.stderr


@pytest.mark.slow
def test_quality_rejects_unusable_tuning_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"grid": {"beta": [0.1]}, "rows": [{"dataset": "musique", "retriever": "iso", "beta": 0.1, "recall@5": 0.5}]}))
    for path, message in [(tmp_path / "missing.json", "cannot read"), (bad, "cannot read"), (other, "no ISO-RAG setting for synthetic")]:
        assert message in quality_error(tmp_path, "--per-dataset-knobs", str(path))
    assert "no dev-tuned knobs recorded for synthetic" in quality_error(tmp_path, "--tuned-on-dev")
    assert not list(tmp_path.glob("quality*.json"))  # nothing written


@pytest.mark.slow
def test_ann_benchmark_compares_exact_hnsw_and_ivf(tmp_path):
    out = run_script(tmp_path, "ann", "--sizes", "1500", "--queries", "12")
    assert "generated-1500" in out
    rows = json.loads((tmp_path / "ann.json").read_text())["rows"]
    assert [row["corpus"] for row in rows] == ["synthetic-dev (title_mention)", "generated-1500"]
    for row in rows:
        assert set(row["runs"]) == {"exact", "hnsw", "ivf"}
        for kind in ("hnsw", "ivf"):
            run = row["runs"][kind]
            assert 0.0 <= run["pool_recall"] <= 1.0 and run["bytes"] > 0 and run["build_s"] > 0 and run["single_p50_ms"] > 0
            assert len(run["sweep"]) == 5
    real = rows[0]["runs"]
    assert all(0.0 <= real[label]["recall@5"] <= 1.0 for label in real)
    # 62 passages: both indexes search them all, so the pool and the rankings are the exact ones
    assert real["ivf"]["pool_recall"] == 1.0 and real["ivf"]["recall@5"] == real["exact"]["recall@5"]


@pytest.mark.slow
@pytest.mark.parametrize("compare", ["batching", pytest.param("backends", marks=pytest.mark.extra("onnx"))])
def test_load_test_drives_both_servers_at_every_level_and_checks_their_answers(compare, shared_data, tmp_path):
    from isorag_pyg import ISORAGIndex, PhiSpec
    from isorag_pyg.datasets import generate_synthetic_dataset
    from isorag_pyg.encoders import SentenceEncoder

    corpus = generate_synthetic_dataset(num_entities=40, num_hubs=2, hub_size=10, num_questions=4).corpus
    backends = ["torch", "onnx-int8"] if compare == "backends" else ["torch"]
    root = tmp_path / "index"
    for backend in backends:  # backends: one index per backend under root
        ISORAGIndex.build(corpus, encoder=SentenceEncoder(backend=backend, show_progress=False), f_theta=None, phi=PhiSpec(p=0.0),
                          progress=False).save(root / backend if compare == "backends" else root)
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path), "ISORAG_DATA_DIR": str(shared_data)}  # 2Wiki questions, any index
    subprocess.run([sys.executable, "-m", "benchmarks.load_test", "--compare", compare, "--index", str(root), "--clients", "1", "4",
                    "--requests", "8", "--warmup", "2", "--level-seconds", "60", "--check-questions", "12"],
                   cwd=REPO, env=env, check=True, capture_output=True, text=True, timeout=600)
    result = json.loads((tmp_path / ("load_test.json" if compare == "batching" else "load_test_backends.json")).read_text())
    names = ["on", "off"] if compare == "batching" else ["onnx-int8", "torch"]
    assert result["servers"] == names and [level["clients"] for level in result["levels"]] == [1, 4]
    for level in result["levels"]:
        for name in names:
            assert level[name]["requests"] == 8 and not level[name]["errors"] and level[name]["p99_ms"] >= level[name]["p50_ms"] > 0
            # the servers' own histogram: every request's time inside the server is part of the client's
            assert level[name]["server_p99_ms"] >= level[name]["server_p50_ms"] > 0
            assert level[name]["server_p50_ms"] <= 1.25 * level[name]["p50_ms"]  # a bucket's upper bound: at most 25% high
    if compare == "batching":
        assert all(level["off"]["questions_per_batch"] == 1.0 for level in result["levels"])
    else:
        assert {info["encoder_backend"] for info in result["indexes"].values()} == {"torch", "onnx-int8"}
    for name in names:  # 12 questions asked one a request by 16 clients: the same top 5 as ISORAGIndex.retrieve
        assert result["served_check"][name]["questions"] == 12 and result["served_check"][name]["identical_top_k_share"] == 1.0
    ratio, p99 = (5, 100) if compare == "batching" else (3, 500)
    assert set(result["targets"]) == {f"ratio_at_4_clients>={ratio}", f"p99_{names[0]}_at_4_clients<={p99}ms",
                                      *(f"served_equals_retrieve_{name}" for name in names)}


@pytest.mark.slow
def test_flood_measures_real_clients_with_and_without_idle_and_slow_sockets(tmp_path):
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "benchmarks.flood", "--corpus", "synthetic", "--index", str(tmp_path / "index"), "--idle", "60",
                    "--slow", "40", "--clients", "4", "--requests", "60", "--warmup", "8", "--settle", "1"],
                   cwd=REPO, env=env, check=True, capture_output=True, text=True, timeout=900)
    result = json.loads((tmp_path / "flood.json").read_text())
    assert result["server_alive"] and result["targets"]["no_failed_request"], result
    assert [result[phase]["answered"] for phase in ("without_before", "with_flood", "without_after")] == [60, 60, 60]
    assert result["flood"]["connects"] >= 100 and result["server_connections"]["flood_held"]["waiting"] >= 100
    assert result["p99_ratio"] == round(result["with_flood"]["p99_ms"] / result["without_pooled"]["p99_ms"], 2)


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__"))
def test_every_benchmark_imports_as_a_package_module(script):
    """Each script runs as ``python -m benchmarks.<name>``: its imports resolve inside the package."""
    importlib.import_module(f"benchmarks.{script}")


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):  # a relative import (level > 0) names a module of the benchmarks package
            package = "benchmarks." if node.level else ""
            names |= {package + node.module} if node.module else {package + alias.name for alias in node.names}
    return names


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem not in ("__init__", "common")))
def test_benchmarks_share_code_only_through_common_and_reach_configs_only_through_it(script):
    """No script imports another script, the jobs layer (the apps' config glue) or hydra/omegaconf:
    the shared helpers and the one bridge from the configs to the library's plain arguments are in
    benchmarks/common.py."""
    modules = _imported_modules(REPO / "benchmarks" / f"{script}.py")
    assert not {m for m in modules if m.startswith("benchmarks.") and m != "benchmarks.common"}
    assert not {m for m in modules if m == "isorag_pyg.jobs" or m.startswith("isorag_pyg.jobs.")}
    assert not {m for m in modules if m.split(".")[0] in ("hydra", "omegaconf")}


def test_the_import_check_sees_relative_and_package_imports(tmp_path):
    """The check above would catch ``from . import qa``, ``from .qa import x`` and ``import benchmarks.qa``."""
    script = tmp_path / "script.py"
    script.write_text("from . import qa\nfrom .noise import run\nimport benchmarks.latency\nfrom omegaconf import DictConfig\n")
    assert _imported_modules(script) >= {"benchmarks.qa", "benchmarks.noise", "benchmarks.latency", "omegaconf"}


@pytest.mark.slow
def test_device_speed_compares_devices_side_by_side(tmp_path):
    """The CPU against itself: every ratio is measured, and the second run agrees exactly with the first."""
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "benchmarks.device_speed", "--devices", "cpu", "cpu", "--passages", "1500", "--queries", "16",
                    "--phi-nodes", "1500", "--f-theta-nodes", "600", "--epochs", "1"], cwd=REPO, env=env, check=True, capture_output=True, text=True)
    out = json.loads((tmp_path / "device_speed.json").read_text())
    assert out["devices"] == ["cpu", "cpu"] and len(out["load_before"]) == 3
    (retrieval,) = out["retrieval"]
    assert retrieval["passages"] == 1500 and retrieval["queries"] == 16
    for section in (retrieval, out["phi"], out["f_theta"]):
        assert [run["device"] for run in section["runs"]] == ["cpu", "cpu"]
        assert section["runs"][0]["speedup"] == 1.0 and section["runs"][1]["speedup"] > 0
    assert all(run["same_ranking_share"] == 1.0 and run["mean_overlap"] == 1.0 for run in retrieval["runs"])
    assert all(run["same_finite"] and run["max_abs_diff"] == 0.0 for run in out["phi"]["runs"])
    accuracy = [run["val_triplet_acc"] for run in out["f_theta"]["runs"]]
    assert accuracy[0] == accuracy[1] and 0.0 <= accuracy[0] <= 1.0  # seeded and deterministic on one device


def test_device_speed_refuses_cuda_where_there_is_none(monkeypatch, capsys):
    device_speed = importlib.import_module("benchmarks.device_speed")
    monkeypatch.setattr(device_speed.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["device_speed", "--devices", "cpu", "cuda"])
    with pytest.raises(SystemExit) as exit_info:
        device_speed.main()
    assert exit_info.value.code == 2 and "torch sees no GPU" in capsys.readouterr().err


def test_blank_titles_weighting_choice_is_the_best_mean_over_datasets():
    from benchmarks.blank_titles import weighting_choice

    def row(power, expansion, iso, ppr):
        return {"idf_power": power, "edge_weights": power > 0, "max_expansion": expansion, "beta": 0.05, "tau": 20.0,
                "lambda_graph": 0.8, "lambda_dense": 0.2, "iso": iso, "ppr": {"False": 0.5, "True": ppr}}

    # dataset a prefers the weighted graph at 400, dataset b the unweighted one by less: the mean picks (2.0, 400)
    study = {"a": {"weighting": [row(0.0, 100, 0.60, 0.5), row(2.0, 400, 0.70, 0.6)]},
             "b": {"weighting": [row(0.0, 100, 0.80, 0.5), row(2.0, 400, 0.75, 0.4)]}, "c": {"titles": []}}
    chosen = weighting_choice(study)
    assert chosen["idf_power"] == 2.0 and chosen["iso"] == {"hops": 2, "edge_weights": True, "max_expansion": 400, "beta": 0.05,
                                                            "tau": 20.0, "lambda_graph": 0.8, "lambda_dense": 0.2}
    assert chosen["iso_mean_recall@5"] == pytest.approx(0.725) and chosen["datasets"] == 2
    assert chosen["ppr_edge_weights"] is False  # weighted PPR's mean 0.5 does not beat the unweighted 0.5
    assert weighting_choice({"c": {"titles": []}}) == {}


def test_blank_titles_threshold_is_the_middle_of_the_best_run_of_share_intervals():
    from benchmarks.blank_titles import blanked, title_share_threshold

    def rows(*points):
        return {"titles": [{"title_mention_share": 0.0}, *({"title_mention_share": s, "title_mention": a, "with_entities": b} for s, a, b in points)]}

    # entities help at shares .1 and .2, title mentions alone at .4 and .6: any t in (.2, .4] is best
    study = {"a": rows((0.1, 0.5, 0.6), (0.4, 0.9, 0.8)), "b": rows((0.2, 0.5, 0.7), (0.6, 0.9, 0.7))}
    chosen = title_share_threshold(study)
    assert chosen["interval"] == [0.2, 0.4] and chosen["threshold"] == pytest.approx(0.3) and chosen["corpora"] == 4
    assert title_share_threshold({"a": rows()}) == {}
    from isorag_pyg.datasets.types import Passage
    corpus = [Passage(str(i), f"T{i}", "x") for i in range(200)]
    assert [p.id for p in blanked(corpus)] == [p.id for p in corpus] and all(p.title == "" for p in blanked(corpus))
    kept = sum(p.title != "" for p in blanked(corpus, keep=0.5))
    assert 60 < kept < 140 and blanked(corpus, keep=1.0) == corpus


@pytest.mark.slow
def test_cli_latency_times_every_command_beside_importing_torch(tmp_path):
    overrides = [arg for override in SMALL[:4] for arg in ("--override", override)]
    subprocess.run([sys.executable, "-m", "benchmarks.cli_latency", "--dataset", "synthetic", "--rounds", "1", "--passages", "120", *overrides],
                   cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, check=True, capture_output=True, text=True)
    result = json.loads((tmp_path / "cli_latency.json").read_text())
    assert result["same_top_k_as_library"] and set(result["commands"]) == {
        "python -c 'import torch'", "isorag --help", "isorag info", "isorag query (warm)", "isorag query (cold)", "isorag index (100 passages)",
        "isorag query --threads 2 (warm)"}
    assert result["commands"]["python -c 'import torch'"]["ratio_to_import_torch"] == 1.0
