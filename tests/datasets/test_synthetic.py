"""The synthetic generator: deterministic, multi-hop, disjoint splits, hostile to flat dense retrieval."""
from __future__ import annotations

import itertools
import re

import pytest

from isorag_pyg.datasets import generate_synthetic_dataset


def test_deterministic_for_a_seed():
    a, b = generate_synthetic_dataset(seed=3), generate_synthetic_dataset(seed=3)
    assert a.corpus == b.corpus and a.questions == b.questions
    assert generate_synthetic_dataset(seed=4).corpus != a.corpus


def test_splits_share_corpus_but_not_questions():
    dev, train = generate_synthetic_dataset(split="dev"), generate_synthetic_dataset(split="train")
    assert dev.corpus == train.corpus
    assert not {q.text for q in dev.questions} & {q.text for q in train.questions}


def test_questions_are_chains_through_mentions():
    ds = generate_synthetic_dataset(num_questions=60)
    by_id = {p.id: p for p in ds.corpus}
    assert {q.hop_type for q in ds.questions} == {"2hop", "3hop", "4hop"}
    for q in ds.questions:
        gold = [by_id[g] for g in q.gold_ids]
        assert len(gold) == int(q.hop_type[0])
        assert gold[0].title in q.text
        for prev, nxt in itertools.pairwise(gold):
            assert nxt.title in prev.text  # each hop is reached by a mention
        assert q.answers[0] in gold[-1].text  # the last gold passage names the answer


def test_later_hops_do_not_share_names_with_question():
    ds = generate_synthetic_dataset(num_questions=60)
    by_id = {p.id: p for p in ds.corpus}
    for q in ds.questions:
        words = set(re.findall(r"[A-Z][a-z]+", q.text)) - {"What"}
        for g in q.gold_ids[1:]:
            assert not words & set(by_id[g].title.split())


def test_hubs_and_spurious_links_exist():
    ds = generate_synthetic_dataset()
    hubs = [p for p in ds.corpus if "general reference page" in p.text]
    assert len(hubs) == 6
    assert sum(("confused with" in p.text) or ("compared it to" in p.text) or ("named after" in p.text) for p in ds.corpus) > 20


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        generate_synthetic_dataset(split="test")
    with pytest.raises(ValueError, match="num_entities"):
        generate_synthetic_dataset(num_entities=5)
