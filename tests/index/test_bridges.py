"""The bridging report and the quarantine: a passage written to tie unrelated entities together
ranks first, the walk leaves the strongest bridges out (and the quarantined, kept by save), and
the isorag command reports and quarantines them."""
from __future__ import annotations

import json

import pytest
from index_helpers import isorag, write_jsonl

from isorag_pyg import ISORAGIndex, PhiSpec

NAMES = ["Velmora", "Kostrov", "Aldania", "Brillant", "Darquen", "Orlinde", "Sarnova", "Tavimo", "Umbrella", "Wendoza", "Yarrowby", "Zentira"]


def corpus() -> list[dict[str, str]]:
    """Twelve pairs of passages, each pair about its own two places (an entity graph without titles)."""
    out = []
    for i, name in enumerate(NAMES):
        other = f"Port {name}"
        out.append({"id": f"a{i}", "title": "", "text": f"{name} is a town on the river near {other}, founded by settlers."})
        out.append({"id": f"b{i}", "title": "", "text": f"{other} is a harbour that trades with {name} every summer."})
    return out


INJECTED = {"id": "evil", "title": "", "text": "The Quorvax Society is tied to " + ", ".join(NAMES) + " and to many other famous names."}


@pytest.fixture(scope="module")
def poisoned() -> ISORAGIndex:
    return ISORAGIndex.build([*corpus(), INJECTED], f_theta=None, phi=PhiSpec(p=0.0), progress=False)


def test_the_injected_bridge_ranks_first_and_the_walk_leaves_it_out(poisoned):
    report = poisoned.bridges(top=3)
    assert report[0].id == "evil" and set(report[0].ties) >= {n.lower() for n in NAMES[:3]}
    assert report[0].score > report[1].score
    retriever = poisoned.retriever("iso", bridge_share=0.04)  # one passage of 25
    assert retriever.left_out.nonzero().squeeze(1).tolist() == [poisoned.passages.row_of("evil")]
    assert not poisoned.retriever("iso", bridge_share=0.0).left_out.any()
    assert not poisoned.retriever("iso", bridge_share=0.04, phi_mode="uniform").left_out.any()  # the ablations ablate the scores


def test_a_left_out_bridge_is_no_longer_walked_to(poisoned):
    question = "Which harbour trades with Velmora?"
    off = {"entity_focus": 0.0, "entity_gate": 0.0}  # Velmora's mass split evenly, in full
    walked = [h.id for h in poisoned.retrieve([question], k=3, bridge_share=0.0, **off)[0]]
    guarded = [h.id for h in poisoned.retrieve([question], k=3, bridge_share=0.04, **off)[0]]
    assert "evil" in walked and "evil" not in guarded
    assert {"a0", "b0"} <= set(guarded)
    focused = [h.id for h in poisoned.retrieve([question], k=3, bridge_share=0.0, entity_gate=0.0)[0]]  # the default focus alone: Velmora's
    assert "evil" not in focused and {"a0", "b0"} <= set(focused)  # mass goes to the passages that read like the question
    gated = [h.id for h in poisoned.retrieve([question], k=3, bridge_share=0.0, entity_focus=0.0)[0]]  # the default gate alone: the
    assert "evil" not in gated and {"a0", "b0"} <= set(gated)  # passage far from the question keeps little of Velmora's mass


def test_quarantine_is_kept_by_save_released_and_dropped_with_the_passage(poisoned, tmp_path):
    index = ISORAGIndex.load(poisoned.save(tmp_path / "index"))
    assert index.quarantine(["evil", "a3"]) == ["a3", "evil"]  # in corpus order
    assert index.retriever("iso", bridge_share=0.0).left_out[[index.passages.row_of("evil"), index.passages.row_of("a3")]].all()
    loaded = ISORAGIndex.load(index.save(tmp_path / "index"))
    assert loaded.quarantined == ["a3", "evil"] and loaded.info()["quarantined"] == ["a3", "evil"]
    assert loaded.quarantine(["a3"], release=True) == ["evil"]
    loaded.remove(["evil"])
    assert loaded.quarantined == []
    with pytest.raises(ValueError, match="no passage with id 'nope'"):
        loaded.quarantine(["nope"])
    with pytest.raises(TypeError, match="quarantine"):
        loaded.quarantine("a1")


def test_an_index_saved_without_bridging_scores_computes_them_on_load(poisoned, tmp_path):
    from index_helpers import rewrite
    from safetensors.torch import load_file

    directory = poisoned.save(tmp_path / "old")
    tensors = load_file(directory / "tensors.safetensors")
    del tensors["bridging"]
    rewrite(directory, tensors)
    assert ISORAGIndex.load(directory).bridges(top=1)[0].id == "evil"


@pytest.mark.slow
def test_the_isorag_command_reports_and_quarantines_bridges(tmp_path):
    built = isorag("index", str(write_jsonl(tmp_path / "corpus.jsonl", corpus())), str(tmp_path / "index"), "--quiet")
    assert built.returncode == 0, built.stderr
    index = ISORAGIndex.load(tmp_path / "index")
    index.set_knobs("iso", {**index.knobs.get("iso", {}), "bridge_share": 0.04})  # one passage of 25 (the default 1% leaves out none here)
    index.save(tmp_path / "index")
    added = isorag("add", str(tmp_path / "index"), str(write_jsonl(tmp_path / "more.jsonl", [INJECTED])), "--quarantine")
    assert added.returncode == 0, added.stderr
    assert "bridge evil" in added.stdout and "quarantined" in added.stdout
    info = isorag("info", str(tmp_path / "index"))
    manifest = json.loads(info.stdout)
    assert manifest["quarantined"] == ["evil"] and manifest["bridges"][0]["id"] == "evil" and manifest["bridges"][0]["quarantined"]
    assert "bridge evil" in info.stderr
    released = isorag("quarantine", str(tmp_path / "index"), "evil", "--release")
    assert released.returncode == 0 and "0 quarantined" in released.stdout
