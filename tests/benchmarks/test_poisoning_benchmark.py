"""benchmarks/poisoning.py: the attacks it generates (hand-written questions and passages, no
encoder) and its metrics; and the script end to end on a small synthetic corpus (slow tier)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import (
    ATTACK_CLASSES,
    POISON_PREFIX,
    poisoning_attacks,
    poisoning_targets,
    question_entities,
)
from benchmarks.poisoning import attack_metrics
from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.graph.rule_extractor import RuleExtractor

REPO = Path(__file__).resolve().parents[2]
NAMES = ["Velmora", "Dara Quen", "Tollis Bay", "Marek Stan", "Ivra Lune", "Osk Dorran", "Peltra Hall", "Quisa Renn", "Brandt Ostel",
         "Cairn Vale", "Dusk Harbor", "Ember Rook"]


def _dataset() -> tuple[list[Question], list[Passage]]:
    corpus = [Passage(str(i), name, f"{name} was founded in {1900 + i} near {NAMES[(i + 1) % len(NAMES)]}.") for i, name in enumerate(NAMES)]
    questions = [Question(f"q{i}", f"Who directed the film of {name}?", [NAMES[(i + 2) % len(NAMES)]], [str(i)]) for i, name in enumerate(NAMES)]
    questions.append(Question("q-none", "Who was the first?", ["yes"], ["0"]))  # names no entity: never a target
    return questions, corpus


def test_question_entities_follow_the_query_matching_and_keep_the_questions_spelling():
    assert question_entities("Who directed the film of Dara Quen?") == ["Dara Quen"]
    assert question_entities("Did Lothair II of Lotharingia die in 869?") == ["Lothair II of Lotharingia"]  # the longest span, no number
    assert question_entities("What is the capital?") == []


def test_every_attack_class_is_generated_seeded_with_the_requested_sizes():
    questions, corpus = _dataset()
    targets = poisoning_targets(questions, 8, seed=3)
    assert len(targets) == 8 and len(set(targets)) == 8 and len(questions) - 1 not in targets
    assert targets == poisoning_targets(questions, 8, seed=3) != poisoning_targets(questions, 8, seed=4)
    attacks = poisoning_attacks(questions, corpus, targets, ["American", "2007", "October"], seed=3, injected=4, per_passage=2,
                                answer_targets=2, answer_passages=5, stuffing_entities=3, boilerplate_share=0.25)
    assert list(attacks) == list(ATTACK_CLASSES)
    again = poisoning_attacks(questions, corpus, targets, ["American", "2007", "October"], seed=3, injected=4, per_passage=2,
                              answer_targets=2, answer_passages=5, stuffing_entities=3, boilerplate_share=0.25)
    assert all(attacks[name].injected == again[name].injected and attacks[name].modified == again[name].modified for name in attacks)
    extractor = RuleExtractor()

    answer = attacks["answer"]
    assert answer.targets == targets[:2] and len(answer.injected) == 10
    assert len({p.text for p in answer.injected}) == 10  # a different statement each
    for passage, (t,) in zip(answer.injected, answer.groups):
        assert passage.text.startswith(questions[t].text) and questions[t].answers[0] not in passage.text[len(questions[t].text):]

    for name, passages, per in (("relation", 4, 2), ("relation_4x10", 2, 4), ("stuffing", 4, 2)):
        attack = attacks[name]
        assert len(attack.injected) == passages and [len(g) for g in attack.groups] == [per] * passages
        assert sorted(attack.targets) == sorted(targets)
        for passage, group in zip(attack.injected, attack.groups):
            found = set(extractor.extract_one(passage.text))
            assert all(e.casefold() in found for t in group for e in question_entities(questions[t].text)), (name, passage.text)
        if name.startswith("relation"):  # one invented entity, the title, in every sentence
            assert all(p.text.count(p.title) >= per + 1 for p in attack.injected)
        else:
            assert all({"american", "2007", "october"} <= set(extractor.extract_one(p.text)) for p in attack.injected)

    assert all(p.id.startswith(POISON_PREFIX) for name in attacks for p in attacks[name].injected)
    assert len({p.id for name in attacks for p in attacks[name].injected}) == sum(len(a.injected) for a in attacks.values())

    plate = attacks["boilerplate"]
    assert not plate.injected and not plate.targets and len(plate.modified) == 3
    footer = plate.modified[0].text[len(corpus[int(plate.modified[0].id)].text):]
    assert footer.strip() and all(p.text.endswith(footer) for p in plate.modified)
    attacked = plate.corpus(corpus)
    assert [p.id for p in attacked] == [p.id for p in corpus] and sum(p.text.endswith(footer) for p in attacked) == 3
    assert [p.id for p in attacks["relation"].corpus(corpus)] == [p.id for p in corpus] + [p.id for p in attacks["relation"].injected]


def test_attack_metrics_count_recall_asr_and_injected_passages():
    clean = [["a", "b", "c", "d", "e"], ["a", "x", "y", "z", "w"], ["m", "n", "o", "p", "q"]]
    attacked = [["poison-1", "a", "c", "d", "e"], ["poison-2", "poison-1", "x", "y", "z"], ["m", "n", "o", "p", "q"]]
    gold = [{"a", "b"}, {"x"}, set()]
    m = attack_metrics(clean, attacked, gold, targets=[0, 2], injected={"poison-1", "poison-2"})
    assert m["asr@5"] == 0.5  # question 2 has no injected passage
    assert m["targeted"] == {"questions": 2, "clean_recall@5": 1.0, "attacked_recall@5": 0.5, "injected_per_top5": 0.5}
    assert m["untargeted"] == {"questions": 1, "clean_recall@5": 1.0, "attacked_recall@5": 1.0, "injected_per_top5": 2.0}
    plate = attack_metrics(clean, clean, gold, targets=[], injected=set(), modified={"a", "m"})
    assert plate["asr@5"] is None and plate["modified_share_top5"] == pytest.approx(3 / 15)


@pytest.mark.slow
def test_poisoning_script_runs_every_attack_and_retriever_on_a_synthetic_corpus(llama_server_installed, gemma_gguf, tmp_path):
    overrides = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
                 "dataset.generator.num_questions=20"]
    done = subprocess.run([sys.executable, "-m", "benchmarks.poisoning", "--datasets", "synthetic", "--split", "dev", "--targets", "6",
                           "--injected", "2", "--per-passage", "3", "--answer-targets", "2", "--reader", "--reader-questions", "3",
                           *(arg for o in overrides for arg in ("--override", o))],
                          cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, check=True, capture_output=True, text=True)
    assert "ASR@5" in done.stdout
    (entry,) = json.loads((tmp_path / "poisoning.json").read_text())["results"]
    assert set(entry["attacks"]) == set(ATTACK_CLASSES)
    retrievers = {"dense", "bm25", "ppr", "hipporag", "iso", "iso_no_bridges", "iso_near_duplicates_kept", "iso_no_entity_gate", "iso_uniform",
                  "iso_shuffled"}
    for name, attack in entry["attacks"].items():
        assert retrievers <= set(attack["metrics"])
        for m in attack["metrics"].values():
            assert m["asr@5"] is None if name == "boilerplate" else 0.0 <= m["asr@5"] <= 1.0
        if name != "boilerplate":  # adding the injected passages in place gives the rebuild's top 5s (boilerplate's remove + add renumbers rows)
            assert all(check["identical"] == 1.0 for check in attack["add_equals_rebuild"].values()), attack["add_equals_rebuild"]
    assert entry["attacks"]["relation"]["injected"] == 2 and entry["attacks"]["answer"]["injected"] == 10
    assert min(entry["attacks"]["relation"]["bridging"]["injected_ranks"]) >= 1
    reader = entry["attacks"]["answer"]["reader"]  # the packaged reader over each retriever's attacked top 5
    assert set(reader) == {"dense", "ppr", "hipporag", "iso", "iso_no_bridges", "iso_near_duplicates_kept"}
    assert all(r["questions"] == 3 and 0.0 <= r["targets_with_attacker_answer"] <= 1.0 for r in reader.values())


@pytest.mark.slow
def test_poisoning_script_blanks_every_title_the_injected_passages_too(tmp_path):
    overrides = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
                 "dataset.generator.num_questions=20"]
    subprocess.run([sys.executable, "-m", "benchmarks.poisoning", "--datasets", "synthetic", "--split", "dev", "--targets", "6",
                    "--injected", "2", "--per-passage", "3", "--attacks", "relation", "--no-check-add", "--blank-titles",
                    "--bridge-shares", "0.05", "--out", "blank.json", *(arg for o in overrides for arg in ("--override", o))],
                   cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, check=True, capture_output=True, text=True)
    (entry,) = json.loads((tmp_path / "blank.json").read_text())["results"]
    assert entry["titles"] == "blank" and "title_mention" not in entry["builders"]  # nothing left to mention
    assert "bridge_share" not in entry["knobs"].get("iso", {})  # so the untitled default share applies
    relation = entry["attacks"]["relation"]
    assert all(example["title"] == "" for example in relation["examples"])
    assert relation["bridging"]["iso@0.05"]["bridge_share"] == 0.05 and 0.0 <= relation["metrics"]["iso@0.05"]["asr@5"] <= 1.0
