"""Every real file in ../shared/datasets loads with the expected counts and matched gold."""
from __future__ import annotations

import pytest

from isorag_pyg.datasets import load_qa_dataset

CASES = [
    # questions file, corpus file, questions, passages (None: not fixed by the file)
    ("2wikimultihopqa/dev.json", "2wikimultihopqa/corpus.json", 1000, 6119),
    ("2wikimultihopqa/train.json", None, 500, None),
    ("musique/dev.json", None, 100, None),
    ("musique/train.json", None, 100, 1890),  # sibling train_corpus.json is picked up
    ("hotpotqa/dev.jsonl", None, 200, None),
    ("hotpotqa/train.json", None, 100, 994),  # {title: [sentences]} corpus
]


@pytest.mark.shared_data
@pytest.mark.parametrize("questions,corpus,n_questions,n_passages", CASES)
def test_shared_file_loads(shared_data, questions, corpus, n_questions, n_passages):
    ds = load_qa_dataset(shared_data / questions, corpus and shared_data / corpus)
    assert len(ds.questions) == n_questions
    if n_passages is not None:
        assert len(ds.corpus) == n_passages
    assert ds.report.unmatched == []
    assert all(len(q.gold_ids) >= 1 for q in ds.questions)
    ids = {p.id for p in ds.corpus}
    assert all(set(q.gold_ids) <= ids for q in ds.questions)
    assert all(q.answers for q in ds.questions)


@pytest.mark.shared_data
def test_musique_gold_by_title_and_text(shared_data):
    ds = load_qa_dataset(shared_data / "musique/dev.json")
    assert ds.report.exact == sum(len(q.gold_ids) for q in ds.questions)
    assert ds.report.title_only == 0
    by_id = {p.id: p for p in ds.corpus}
    assert all(q.hop_type in {"2hop", "3hop", "4hop"} for q in ds.questions)
    # union-of-contexts corpus: every context passage is in the corpus
    assert all(len(q.context_ids) == 20 for q in ds.questions)
    assert all(by_id[g].text for q in ds.questions for g in q.gold_ids)


@pytest.mark.shared_data
def test_hotpot_dev_contexts_and_types(shared_data):
    ds = load_qa_dataset(shared_data / "hotpotqa/dev.jsonl")
    assert {q.hop_type for q in ds.questions} <= {"bridge", "comparison"}
    # 199 questions carry 10 paragraphs, one carries only its 2 gold paragraphs
    assert sorted(len(q.context_ids) for q in ds.questions) == [2] + [10] * 199
    assert ds.report.exact == 400


@pytest.mark.shared_data
def test_2wiki_titles_only_matches_case_variants(shared_data):
    ds = load_qa_dataset(shared_data / "2wikimultihopqa/dev.json", shared_data / "2wikimultihopqa/corpus.json")
    q = next(q for q in ds.questions if "I Can'T See Myself" in q.text)
    titles = {ds.corpus[int(g)].title for g in q.gold_ids}
    assert "Aretha Franklin" in titles
    assert "Detroit, Michigan" in q.answers and "Detroit" in q.answers
