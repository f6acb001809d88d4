"""Own corpora: passage files, dataset files and folders of documents; bad files."""
from __future__ import annotations

import json
import logging

import pytest

from isorag_pyg import ISORAGIndex, defaults
from isorag_pyg.datasets import DatasetFormatError
from isorag_pyg.datasets.corpus_files import (
    MAX_PASSAGE_CHARS,
    load_corpus,
    tokenizer_counter,
)
from isorag_pyg.encoders.sentence import resolve_model


def test_folder_of_documents(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "paris.md").write_text("# Paris\n\nParis is the capital of France.\n\nIt lies on the Seine.")
    (tmp_path / "sub" / "seine.txt").write_text("The Seine flows through Paris.")
    (tmp_path / "sub" / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "empty.md").write_text("  \n\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / ".hidden.md").write_text("# Hidden\n\nnot read")
    passages, report = load_corpus(tmp_path, max_tokens=50)
    assert [(p.id, p.title, p.text) for p in passages] == [
        ("paris.md#0", "Paris", "Paris is the capital of France. It lies on the Seine."),
        ("sub/seine.txt#0", "seine", "The Seine flows through Paris."),
    ]
    assert report.skipped_binary == ["sub/blob.txt"] and report.skipped_undecodable == ["latin1.md"]
    assert report.skipped_empty == ["empty.md"] and report.ignored_other == ["image.png"] and report.documents == 2
    assert "1 binary" in report.summary() and "1 not UTF-8" in report.summary() and "1 empty" in report.summary()
    one_per_paragraph, _ = load_corpus(tmp_path, max_tokens=7)
    assert [p.id for p in one_per_paragraph] == ["paris.md#0", "paris.md#1", "sub/seine.txt#0"]


def test_a_single_document_reads_as_a_folder_holding_only_it(tmp_path):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "sub" / "paris.md").write_text("# Paris\n\nParis is the capital of France.\n\nIt lies on the Seine.")
    (tmp_path / "docs" / "notes.TXT").write_text("Plain notes.")
    (tmp_path / "docs" / "blank.txt").write_text("\n\n")
    one_file, report = load_corpus(tmp_path / "docs" / "sub" / "paris.md", max_tokens=7)
    assert one_file == load_corpus(tmp_path / "docs" / "sub", max_tokens=7)[0]
    assert [p.id for p in one_file] == ["paris.md#0", "paris.md#1"] and report.documents == 1  # ids from the name, as in its folder
    assert [p.id for p in load_corpus(tmp_path / "docs" / "notes.TXT")[0]] == ["notes.TXT#0"]
    with pytest.raises(DatasetFormatError, match=r"no passages found .*1 empty file\(s\) skipped \(blank.txt\)"):
        load_corpus(tmp_path / "docs" / "blank.txt")


def test_a_document_paragraph_over_the_character_limit_is_split_and_logged(tmp_path, caplog):
    paragraph = " ".join(f"Sentence {i} tells of Velmora." for i in range(2_500))  # ~68 KB, one paragraph
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "big.txt").write_text(paragraph)
    (tmp_path / "big" / "blob.md").write_text("x" * (MAX_PASSAGE_CHARS + 5))  # one "word" over the limit
    (tmp_path / "big.jsonl").write_text(json.dumps({"id": "big", "title": "Big", "text": paragraph}))
    for path, listed in ((tmp_path / "big", ["big.txt", "blob.md"]), (tmp_path / "big.jsonl", ["big"])):
        with caplog.at_level(logging.WARNING):
            passages, report = load_corpus(path, max_tokens=100_000)
        assert max(len(p.text) for p in passages) <= MAX_PASSAGE_CHARS and len(passages) > 3
        assert " ".join(p.text for p in passages if not p.id.startswith("blob")) == paragraph  # nothing lost, order kept
        assert report.split_long == listed and f"over {MAX_PASSAGE_CHARS} characters split" in caplog.text


def test_nothing_a_folder_or_a_record_holds_is_dropped_without_a_word(tmp_path, caplog):
    """Before: a folder's .png and .html files were ignored silently, and a record's other text
    fields too; now each is listed (files by kind) in the report and logged as a warning."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "paris.md").write_text("Paris is the capital of France.")
    for name in ("logo.png", "index.html", "about.html", "Makefile"):
        (tmp_path / "docs" / name).write_text("x")
    with caplog.at_level(logging.WARNING, logger="isorag_pyg.datasets.corpus_files"):
        passages, report = load_corpus(tmp_path / "docs")
    assert [p.id for p in passages] == ["paris.md#0"] and report.ignored_other == ["Makefile", "about.html", "index.html", "logo.png"]
    assert "4 file(s) other than .txt/.md ignored (.html: 2, no suffix: 1, .png: 1; e.g. Makefile, about.html, index.html)" in caplog.text
    caplog.clear()
    (tmp_path / "extra.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"id": "1", "title": "A", "text": "Alpha", "body": "Text the passage does not take", "score": 3},
        {"id": "2", "title": "B", "text": "Beta", "paragraph_text": "Beta", "body": "more"})))
    with caplog.at_level(logging.WARNING, logger="isorag_pyg.datasets.corpus_files"):
        passages, report = load_corpus(tmp_path / "extra.jsonl")
    assert [p.text for p in passages] == ["Alpha", "Beta"] and report.unread_fields == {"body": 2}
    assert "text in fields no passage reads, ignored: 'body' (2 records)" in caplog.text
    (tmp_path / "quoted.csv").write_text('id,title,text\n3,Baz,"Baz is, with commas, whole"\n')
    assert load_corpus(tmp_path / "quoted.csv")[0][0].text == "Baz is, with commas, whole"


def test_passage_files_in_every_format(tmp_path):
    records = [{"title": "A", "text": "alpha text"}, {"title": "B", "text": "beta text"}]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    (tmp_path / "c.json").write_text(json.dumps([{**r, "id": str(i)} for i, r in enumerate(records)]))
    (tmp_path / "c.csv").write_text("id,title,text\nx,A,\"alpha, with a comma\"\ny,B,beta\n")
    (tmp_path / "dict.json").write_text(json.dumps({"A": ["alpha", "sentences."], "B": "beta"}))
    assert [p.text for p in load_corpus(tmp_path / "c.jsonl")[0]] == ["alpha text", "beta text"]
    assert [p.id for p in load_corpus(tmp_path / "c.json")[0]] == ["0", "1"]
    assert [(p.id, p.text) for p in load_corpus(tmp_path / "c.csv")[0]] == [("x", "alpha, with a comma"), ("y", "beta")]
    assert [p.text for p in load_corpus(tmp_path / "dict.json")[0]] == ["alpha sentences.", "beta"]
    # {"data": [records]} is the records; a title "data" of a {title: [sentences]} corpus stays a passage
    (tmp_path / "wrapped.json").write_text(json.dumps({"version": "1", "data": records}))
    assert [(p.title, p.text) for p in load_corpus(tmp_path / "wrapped.json")[0]] == [("A", "alpha text"), ("B", "beta text")]
    (tmp_path / "data_title.json").write_text(json.dumps({"data": ["Data are facts."], "B": "beta"}))
    assert [(p.title, p.text) for p in load_corpus(tmp_path / "data_title.json")[0]] == [("data", "Data are facts."), ("B", "beta")]
    musique = [{"id": "q1", "question": "Q?", "answer": "a", "paragraphs": [
        {"idx": 0, "title": "T1", "paragraph_text": "first", "is_supporting": True},
        {"idx": 1, "title": "T2", "paragraph_text": "second", "is_supporting": False}]}]
    (tmp_path / "musique.json").write_text(json.dumps(musique))
    assert [p.title for p in load_corpus(tmp_path / "musique.json")[0]] == ["T1", "T2"]


def test_bad_passage_files_are_clear_errors(tmp_path):
    cases = {
        "empty_text.jsonl": ('{"title": "A", "text": "ok"}\n{"title": "B", "text": "  "}', "record 1: field 'text': empty passage text"),
        "dup.jsonl": ('{"id": "1", "text": "a"}\n{"id": "1", "text": "b"}', "duplicate passage id"),
        "no_text.csv": ("title,body\nA,x\n", "needs a 'text' column"),
        "empty.csv": ("title,text\n", "no rows"),
        "broken.json": ("[{\"title\": ", "invalid JSON"),
        "empty.jsonl": ("", "file is empty"),
        "titles_only.json": (json.dumps([{"id": "1", "question": "Q?", "answer": "a", "supporting_facts": ["A"]}]), "gold titles only"),
        "no_text.json": (json.dumps([{"title": "a", "body": "Alpha"}]), "record 0: field 'text or paragraph_text': missing"),
        "some_no_text.json": (json.dumps([{"title": "a", "text": "Alpha"}, {"title": "b"}]), "record 1: field 'text or paragraph_text': missing"),
        "no_text.jsonl": ('{"title": "a", "body": "Alpha"}', "record 0: field 'text or paragraph_text': missing"),
        "mixed_data.json": (json.dumps({"data": [{"title": "A", "text": "alpha"}, "stray"]}), "field 'data': expected a list of sentences or a text, got list holding records"),
        "empty_data.json": (json.dumps({"data": []}), "corpus is empty"),
        # before: the row was read as "Baz is" and ",extra,fields" dropped without a word
        "extra_fields.csv": ("id,title,text\n3,Baz,Baz is,extra,fields\n", "record 0: the record starting on line 2 has 5 fields, the header 3"),
        "two_texts.json": (json.dumps([{"title": "a", "text": "Alpha", "paragraph_text": "Beta"}]), "record 0: 'text' and 'paragraph_text' differ"),
    }
    for name, (content, match) in cases.items():
        (tmp_path / name).write_text(content)
        with pytest.raises(DatasetFormatError, match=match):
            load_corpus(tmp_path / name)
    (tmp_path / "latin1.csv").write_bytes("title,text\nA,caf\xe9\n".encode("latin-1"))
    with pytest.raises(DatasetFormatError, match="not UTF-8"):
        load_corpus(tmp_path / "latin1.csv")
    (tmp_path / "only_binary").mkdir()
    (tmp_path / "only_binary" / "x.txt").write_bytes(b"\x00\x00")
    with pytest.raises(DatasetFormatError, match="no passages found.*1 binary"):
        load_corpus(tmp_path / "only_binary")
    with pytest.raises(FileNotFoundError):
        load_corpus(tmp_path / "missing")
    for bad in (0, -3, 2.5, True):  # checked for passage files too, before anything is read
        with pytest.raises(ValueError, match=f"max_tokens must be a positive integer, got {bad!r}"):
            load_corpus(tmp_path / "missing", max_tokens=bad)


def test_read_corpus_counts_tokens_with_the_encoders_tokenizer(tmp_path):
    (tmp_path / "long.md").write_text("# Long\n\n" + " ".join(f"word{i}" for i in range(300)))
    passages = ISORAGIndex.read_corpus(tmp_path, max_tokens=100)
    count = tokenizer_counter(resolve_model(defaults.ENCODER))
    assert len(passages) > 3 and all(count(p.text) <= 100 for p in passages)  # "word12" is 2 word pieces
    by_words = ISORAGIndex.read_corpus(tmp_path, max_tokens=100, encoder=None)
    assert len(by_words) == 3
    assert ISORAGIndex.read_corpus(tmp_path / "long.md", max_tokens=100) == passages  # one document: the same, tokens counted alike
