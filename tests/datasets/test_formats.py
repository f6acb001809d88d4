"""Hand-made files in every supported format, and malformed files with clear errors."""
from __future__ import annotations

import json

import pytest

from isorag_pyg.datasets import DatasetFormatError, load_qa_dataset


def write(path, obj, jsonl=False):
    if jsonl:
        path.write_text("\n".join(json.dumps(o) for o in obj) + "\n")
    else:
        path.write_text(json.dumps(obj))
    return path


MUSIQUE = [
    {
        "id": "2hop__1_2", "question": "Who founded the label of Song A?", "answer": "Ann",
        "answer_aliases": ["Ann B."], "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "Song A", "paragraph_text": "Song A was released by  Label X.", "is_supporting": True},
            {"idx": 1, "title": "Label X", "paragraph_text": "Label X was founded by Ann.", "is_supporting": True},
            {"idx": 2, "title": "Label X", "paragraph_text": "Label X is also a river.", "is_supporting": False},
        ],
    },
    {
        "id": "3hop1__3_4", "question": "Q2?", "answer": "B",
        "paragraphs": [
            {"idx": 0, "title": "Label X", "paragraph_text": "Label X was founded by Ann.", "is_supporting": True},
            {"idx": 1, "title": "Other", "paragraph_text": "Other text.", "is_supporting": False},
        ],
    },
]


@pytest.mark.parametrize("jsonl", [False, True])
def test_musique_json_and_jsonl(tmp_path, jsonl):
    path = write(tmp_path / ("q.jsonl" if jsonl else "q.json"), MUSIQUE, jsonl)
    ds = load_qa_dataset(path)
    # union of contexts, deduplicated by (title, text); repeated titles stay distinct passages
    assert [(p.title, p.text) for p in ds.corpus] == [
        ("Song A", "Song A was released by Label X."),
        ("Label X", "Label X was founded by Ann."),
        ("Label X", "Label X is also a river."),
        ("Other", "Other text."),
    ]
    q1, q2 = ds.questions
    assert q1.gold_ids == ["0", "1"] and q2.gold_ids == ["1"]
    assert q1.context_ids == ["0", "1", "2"]
    assert q1.answers == ["Ann", "Ann B."]
    assert (q1.hop_type, q2.hop_type) == ("2hop", "3hop")
    assert ds.report.exact == 3 and ds.report.unmatched == []


def test_musique_jsonl_named_json(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text("\n".join(json.dumps(o) for o in MUSIQUE))
    assert len(load_qa_dataset(path).questions) == 2


def test_hotpot_official_format(tmp_path):
    record = {
        "_id": "h1", "question": "Which band?", "answer": "Rush", "type": "bridge",
        "context": [["Rush", ["Rush is a band.", " It is Canadian."]], ["Other", ["Nothing."]]],
        "supporting_facts": [["Rush", 0], ["Rush", 1]],
    }
    ds = load_qa_dataset(write(tmp_path / "dev.json", [record]))
    assert [p.text for p in ds.corpus] == ["Rush is a band. It is Canadian.", "Nothing."]
    assert ds.questions[0].gold_ids == ["0"] and ds.questions[0].hop_type == "bridge"


def test_hotpot_with_sentence_dict_corpus_sibling(tmp_path):
    record = {"_id": "h1", "question": "Q?", "answer": "A",
              "context": [["T1", ["One.", " Two."]], ["T2", ["Three."]]], "supporting_facts": [["T2", 0]]}
    write(tmp_path / "train.json", [record])
    write(tmp_path / "train_corpus.json", {"T1": ["One.", " Two."], "T2": ["Three."], "T3": ["Four."]})
    ds = load_qa_dataset(tmp_path / "train.json")
    assert len(ds.corpus) == 3
    assert ds.questions[0].gold_ids == ["1"] and ds.questions[0].context_ids == ["0", "1"]


def test_ircot_format(tmp_path):
    record = {"question_id": "2hop__9", "question_text": "Q?", "answers_objects": [{"spans": ["A", "a"]}],
              "contexts": [{"id": 1, "title": "T", "paragraph_text": "x", "is_supporting": True},
                           {"id": 2, "title": "U", "paragraph_text": "y", "is_supporting": False}]}
    ds = load_qa_dataset(write(tmp_path / "ircot.jsonl", [record], jsonl=True))
    q = ds.questions[0]
    assert q.answers == ["A", "a"] and q.gold_ids == ["0"] and q.hop_type == "2hop"


def test_titles_only_with_corpus_casefold_and_unmatched(tmp_path, caplog):
    questions = [
        {"id": "a", "question": "Q1?", "answer": "x", "answer_aliases": ["y"], "supporting_facts": ["Alpha", "beta"]},
        {"id": "b", "question": "Q2?", "answer": "z", "supporting_facts": ["Gamma", "Missing"]},
    ]
    corpus = [{"title": "Alpha", "text": "a"}, {"title": "Beta", "text": "b"}, {"title": "Gamma", "text": "c"}]
    ds = load_qa_dataset(write(tmp_path / "q.json", questions), write(tmp_path / "c.json", corpus))
    assert ds.questions[0].gold_ids == ["0", "1"]
    assert ds.questions[1].gold_ids == ["2"]
    assert ds.report.title_only == 2 and ds.report.casefold_fallback == 1
    assert ds.report.unmatched == [("b", "Missing")]
    assert "not found in the corpus" in caplog.text


def test_titles_only_needs_corpus(tmp_path):
    path = write(tmp_path / "q.json", [{"id": "a", "question": "Q?", "answer": "x", "supporting_facts": ["A"]}])
    with pytest.raises(DatasetFormatError, match="corpus"):
        load_qa_dataset(path)


def test_corpus_ids_kept_and_duplicates_merged(tmp_path):
    q = write(tmp_path / "q.json", [{"id": "a", "question": "Q?", "answer": "x", "supporting_facts": ["A"]}])
    c = write(tmp_path / "c.json", [{"id": "p1", "title": "A", "text": "t"}, {"id": "p2", "title": "A", "text": "t"},
                                   {"id": "p3", "title": "B", "text": "u"}])
    ds = load_qa_dataset(q, c)
    assert [p.id for p in ds.corpus] == ["p1", "p3"]
    assert ds.report.duplicate_passages == 1


@pytest.mark.parametrize(
    "content,match",
    [
        ("[{\"id\": 1,", "invalid JSON"),
        ("", "file is empty"),
        ("[]", "no questions"),
        (json.dumps([{"foo": 1}]), "unrecognised question format"),
        (json.dumps([{"id": "a", "question": "Q", "answer": "x", "paragraphs": "oops"}]), r"record 0: field 'paragraphs': expected list"),
        (json.dumps(MUSIQUE[:1] + [{"id": "b", "answer": "x", "paragraphs": []}]), r"record 1: field 'question': missing"),
        (json.dumps([MUSIQUE[0], MUSIQUE[0]]), r"record 1: field 'id': duplicate question id"),
        (json.dumps([{"id": "a", "question": " ", "answer": "x", "paragraphs": []}]), "empty question text"),
    ],
)
def test_malformed_question_files(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DatasetFormatError, match=match) as err:
        load_qa_dataset(path)
    assert str(path) in str(err.value)


def test_malformed_jsonl_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(MUSIQUE[0]) + "\n{broken\n")
    with pytest.raises(DatasetFormatError, match="line 2"):
        load_qa_dataset(path)


@pytest.mark.parametrize(
    "corpus,match",
    [
        ([], "corpus is empty"),
        ({}, "corpus is empty"),
        ([{"title": "A"}], r"record 0: field 'text or paragraph_text': missing"),
        ([{"id": "p", "title": "A", "text": "x"}, {"id": "p", "title": "B", "text": "y"}], "duplicate passage id 'p'"),
        ({"A": 3}, "field 'A'"),
        ("just a string", "expected a list or dict corpus"),
    ],
)
def test_malformed_corpus_files(tmp_path, corpus, match):
    q = write(tmp_path / "q.json", [{"id": "a", "question": "Q?", "answer": "x", "supporting_facts": ["A"]}])
    c = write(tmp_path / "c.json", corpus)
    with pytest.raises(DatasetFormatError, match=match):
        load_qa_dataset(q, c)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_qa_dataset(tmp_path / "nope.json")
