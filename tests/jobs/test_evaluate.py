"""evaluate.py's job composed from the real configs on the synthetic corpus."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from isorag_pyg.graph.auto import ENTITY_GRAPH_KNOBS, TITLE_MENTION_KNOBS
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.jobs.evaluate import run_evaluation
from isorag_pyg.jobs.train import INDEX_DIR, run_training

CONF = str(Path(__file__).resolve().parents[2] / "conf")
SMALL = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
         "dataset.generator.num_questions=20", "encoder.show_progress=false"]


def evaluate(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("eval", overrides=[f"paths.output_dir={tmp_path}", *SMALL, "trainer.max_epochs=2", *overrides])
        return run_evaluation(cfg)


@pytest.mark.slow
def test_compare_writes_metrics_traces_and_case_study(tmp_path):
    out = tmp_path / "copy" / "m.json"
    summary = evaluate(tmp_path, "compare=[iso,dense,bm25,ppr,iso_uniform]", "case_study=0", f"metrics_out={out}")
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk == json.loads(out.read_text()) and on_disk["retriever"] == "iso"
    for key in ("recall@5", "recall@10", "precision@5", "precision@10", "latency_ms_per_query", "removed_edge_fraction",
                "n_questions", "query_encoding_ms_per_query", "builders", "leak"):
        assert key in on_disk
    assert on_disk["n_questions"] == 20 and on_disk["leak"] is False
    assert set(on_disk["retrievers"]) == {"iso", "dense", "bm25", "ppr", "iso_uniform"}
    assert on_disk["retrievers"]["iso_uniform"]["removed_edge_fraction"] == 0.0
    for name in on_disk["retrievers"]:
        lines = (tmp_path / f"traces_{name}.jsonl").read_text().splitlines()
        assert len(lines) == 20
        record = json.loads(lines[0])
        assert len(record["top"]) == 10 and {"id", "title", "score", "gold"} <= set(record["top"][0])
    iso_trace = json.loads((tmp_path / "traces_iso.jsonl").read_text().splitlines()[0])
    assert "pruned_edges" in iso_trace and len(iso_trace["seeds"]) == 5
    png = tmp_path / "case_study_iso.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["retrievers"]["dense"]["recall@10"] >= summary["retrievers"]["dense"]["recall@5"]


def cached_indexes(tmp_path: Path) -> list[Path]:
    """The index folders in the evaluation cache (not the writers' lock files beside them)."""
    return sorted(p for p in (tmp_path / "cache" / "indexes").iterdir() if p.is_dir())


@pytest.mark.slow
def test_index_is_built_once_then_cached(tmp_path):
    cache = f"encoder.cache_dir={tmp_path / 'cache'}"
    a = evaluate(tmp_path / "a", "traces=false", cache, "phi.p=1")
    b = evaluate(tmp_path / "b", "traces=false", cache, "phi.p=1")
    assert len(cached_indexes(tmp_path)) == 1
    assert (tmp_path / "a" / "f_theta").is_dir() and not (tmp_path / "b" / "f_theta").exists()
    assert a["retriever"] == "iso_synthetic" and a["recall@5"] == b["recall@5"]  # the synthetic corpus's own tuned knobs
    evaluate(tmp_path / "c", "traces=false", cache, "phi.p=1", "phi.shell_floor=2.0")  # another φ recipe: another index
    assert len(cached_indexes(tmp_path)) == 2


@pytest.mark.slow
def test_f_theta_is_trained_only_when_phi_needs_it(tmp_path):
    summary = evaluate(tmp_path / "default", "traces=false", f"encoder.cache_dir={tmp_path / 'cache'}")  # φ: p = 0
    assert not (tmp_path / "default" / "f_theta").exists() and summary["phi"]["p"] == 0.0
    index = ISORAGIndex.load(cached_indexes(tmp_path)[0])
    assert index.z is None and index.f_theta is None
    assert 0.0 < summary["recall@5"] <= 1.0
    # a retriever that asks for f_θ's volumes gets an index with them (train_f_theta: auto)
    evaluate(tmp_path / "p1", "traces=false", f"encoder.cache_dir={tmp_path / 'cache'}", "+retriever.p=1.0")
    assert (tmp_path / "p1" / "f_theta").is_dir() and len(cached_indexes(tmp_path)) == 2


def test_retriever_configs_take_the_knobs_an_entity_graph_index_stores_unless_they_set_them(tmp_path):
    """iso.yaml / ppr.yaml set no knob: on an entity graph, built here or saved and passed as
    ``index=``, evaluate.py runs the index's own knobs; a knob set on the command line, or by an
    ablation's config, changes that knob alone."""
    from isorag_pyg.jobs.evaluate import config_retriever, prepare_evaluation

    def composed(*overrides):
        with initialize_config_dir(config_dir=CONF, version_base="1.3"):
            return compose("eval", overrides=[f"paths.output_dir={tmp_path}", *SMALL, f"encoder.cache_dir={tmp_path / 'cache'}", *overrides])

    def knobs(inputs, *overrides):
        return config_retriever(inputs, composed(*overrides).retriever).knobs

    built = prepare_evaluation(composed("graph=entity_graph", "retriever=iso"))
    own = built.index.retriever("iso").knobs
    assert built.index.knobs == ENTITY_GRAPH_KNOBS and own.hops == 2 and own.edge_weights and own.beta == 0.05
    assert knobs(built, "retriever=iso") == own  # what the index itself retrieves with
    assert knobs(built, "retriever=iso", "retriever.hops=1") == own.replace(hops=1)  # the command line changes one knob
    assert knobs(built, "retriever=iso", "retriever.near_duplicate_cosine=2") == own.replace(near_duplicate_cosine=2.0)  # the ranking rule off
    assert knobs(built, "retriever=iso_uniform") == own.replace(phi_mode="uniform")  # the ablation of the index's own knobs
    assert knobs(built, "retriever=ppr") == built.index.retriever("ppr").knobs and knobs(built, "retriever=ppr").edge_weights
    built.index.save(tmp_path / "saved")
    saved = prepare_evaluation(composed(f"index={tmp_path / 'saved'}", "retriever=iso"))  # graph= plays no part with index=
    assert knobs(saved, "retriever=iso") == own


@pytest.mark.slow
def test_train_py_stores_the_knobs_its_config_sets_over_the_entity_graph_ones(tmp_path):
    def trained(name, *overrides):
        with initialize_config_dir(config_dir=CONF, version_base="1.3"):
            run_training(compose("train", overrides=[f"paths.output_dir={tmp_path / name}", *SMALL, "trainer.max_epochs=1", "logger=none",
                                                     f"encoder.cache_dir={tmp_path / 'cache'}", *overrides]))
        return ISORAGIndex.load(tmp_path / name / INDEX_DIR).knobs

    # iso_synthetic (the synthetic corpus's retriever) sets hops 2 and beta 0.3; the entity graph's other knobs stay
    assert trained("entity", "graph=entity_graph")["iso"] == {**ENTITY_GRAPH_KNOBS["iso"], "hops": 2, "beta": 0.3}
    # nothing set: what the graph alone stores (title mentions: TITLE_MENTION_KNOBS), else the defaults
    assert trained("plain", "retriever=iso") == TITLE_MENTION_KNOBS


def test_compare_refuses_retriever_knobs_its_entries_would_not_get(tmp_path):
    with pytest.raises(ValueError, match=r"retriever.tau would not reach the compare"):
        evaluate(tmp_path, "compare=[iso,dense]", "retriever.tau=5.0", "traces=false")


def test_leaky_graph_is_labelled(tmp_path):
    summary = evaluate(tmp_path, "graph=context_cooccurrence", "retriever=dense", "traces=false")
    assert summary["leak"] is True and "leak" in summary["leak_note"]
    assert summary["builders"] == ["context_cooccurrence"]


@pytest.mark.slow
def test_evaluates_the_index_train_py_saved(tmp_path):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        run_training(compose("train", overrides=[f"paths.output_dir={tmp_path / 'train'}", *SMALL, "trainer.max_epochs=2", "logger=none"]))
    saved = tmp_path / "train" / INDEX_DIR
    summary = evaluate(tmp_path / "eval", f"index={saved}", "traces=false", f"encoder.cache_dir={tmp_path / 'cache'}")
    assert not (tmp_path / "eval" / "f_theta").exists() and not (tmp_path / "cache" / "indexes").exists()  # nothing rebuilt
    assert summary["index"] == str(saved) and 0.0 <= summary["recall@5"] <= 1.0
    # the saved index's own φ is what retrieval used
    index = ISORAGIndex.load(saved)
    assert index.knobs["iso"]["hops"] == 2 and index.knobs["iso"]["beta"] == 0.3  # train.py stored iso_synthetic's knobs
    assert summary["retrievers"]["iso_synthetic"]["recall@5"] == evaluate_index(tmp_path / "again", index)
    with pytest.raises(ValueError, match="another corpus"):
        evaluate(tmp_path / "other", f"index={saved}", "dataset.generator.seed=7", "traces=false")


def evaluate_index(tmp_path, index) -> float:
    """Recall@5 of the index's default ISO-RAG retriever on the same small synthetic questions."""
    from isorag_pyg.evaluation import evaluate_retrievers
    from isorag_pyg.jobs.evaluate import prepare_evaluation

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("eval", overrides=[f"paths.output_dir={tmp_path}", *SMALL, "traces=false"])
    inputs = prepare_evaluation(cfg)
    return evaluate_retrievers({"iso": index.retriever("iso")}, inputs.queries, inputs.gold)["iso"].metrics["recall@5"]


def test_split_train_and_unknown_names(tmp_path):
    summary = evaluate(tmp_path, "split=train", "retriever=bm25", "traces=false")
    assert summary["split"] == "train" and summary["dataset"] == "synthetic-train"
    with pytest.raises(Exception, match="nope"):
        evaluate(tmp_path, "retriever=nope")
    with pytest.raises(Exception, match="nonexistent"):
        evaluate(tmp_path, "dataset=nonexistent")
    with pytest.raises(ValueError, match="case_study"):
        evaluate(tmp_path, "case_study=999", "traces=true")


def test_traces_and_case_study_name_the_entity_nodes_of_an_entity_graph(tmp_path):
    # a beta that prunes, so pruned edges reach entity nodes (rows past the passages)
    summary = evaluate(tmp_path, "graph=entity_graph", "retriever=iso", "retriever.beta=0.9", "case_study=0", f"encoder.cache_dir={tmp_path / 'cache'}")
    records = [json.loads(line) for line in (tmp_path / "traces_iso.jsonl").read_text().splitlines()]
    ids = {passage.id for passage in ISORAGIndex.load(tmp_path / "cache" / "indexes" / next(
        p.name for p in (tmp_path / "cache" / "indexes").iterdir() if p.is_dir())).passages}
    ends = [end for record in records for edge in record["pruned_edges"] for end in edge]
    entity_ends = [end for end in ends if end.startswith("entity:")]
    assert entity_ends and all(end in ids for end in ends if not end.startswith("entity:"))
    seeded = [seed for record in records for seed in record.get("entity_seeds", [])]
    # entity nodes, and passages seeded for an entity only they mention
    assert any(seed.startswith("entity:") for seed in seeded) and all(seed.startswith("entity:") or seed in ids for seed in seeded)
    assert (tmp_path / "case_study_iso.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["removed_edge_fraction"] > 0
    ran = summary["retrievers"]["iso"]["knobs"]  # the set knob over the index's stored ones
    assert ran["beta"] == 0.9 and ran["hops"] == ENTITY_GRAPH_KNOBS["iso"]["hops"] and ran["edge_weights"] is True
