"""Corpus intake for builds and updates: ids that never collide, inputs that name what is wrong."""
from __future__ import annotations

import logging

import pytest
from index_helpers import build, isorag, passages, write_jsonl

from isorag_pyg import ISORAGIndex
from isorag_pyg.datasets.corpus_files import load_corpus
from isorag_pyg.datasets.corpus_report import MAX_PASSAGE_CHARS
from isorag_pyg.datasets.errors import DatasetFormatError


def test_added_passages_without_ids_get_ids_that_never_collide(tmp_path):
    index = build([{k: v for k, v in r.items() if k != "id"} for r in passages(6)])
    assert index.passages.ids == ["0", "1", "2", "3", "4", "5"]
    index.remove(["5", "2"])
    index.add([{k: v for k, v in r.items() if k != "id"} for r in passages(2, 10)])
    assert index.passages.ids[-2:] == ["6", "7"]  # never "0", "1" again, nor the removed "5"
    loaded = ISORAGIndex.load(index.save(tmp_path / "index"))
    assert loaded.next_id == 8
    loaded.add([{"id": "41", **{k: v for k, v in passages(1, 20)[0].items() if k != "id"}}])
    loaded.add([{k: v for k, v in r.items() if k != "id"} for r in passages(1, 30)])
    assert loaded.passages.ids[-1] == "42"  # past every number ever given
    done = isorag("add", str(loaded.save(tmp_path / "index")), str(write_jsonl(tmp_path / "more.jsonl", [
        {k: v for k, v in r.items() if k != "id"} for r in passages(2, 40)])))
    assert done.returncode == 0, done.stderr[-2000:]
    assert ISORAGIndex.load(tmp_path / "index").passages.ids[-2:] == ["43", "44"]

def test_a_file_mixing_records_with_and_without_ids_is_refused(tmp_path):
    records = passages(5)
    del records[3]["id"]
    with pytest.raises(DatasetFormatError, match=r"record 3: field 'id': has no id"):
        load_corpus(write_jsonl(tmp_path / "mixed.jsonl", records))
    records = passages(5, ids=False)
    records[1]["id"] = "x"
    with pytest.raises(DatasetFormatError, match=r"record 1: field 'id': has an id"):
        load_corpus(write_jsonl(tmp_path / "mixed2.jsonl", records))
    with pytest.raises(ValueError, match="record 1"):
        build(records)

def test_identical_text_under_two_ids_is_reported(copy, tmp_path, caplog):
    twin = {**passages(1, 5)[0], "id": "twin-of-p5"}
    with caplog.at_level(logging.WARNING):
        corpus, _ = load_corpus(write_jsonl(tmp_path / "twins.jsonl", passages(3) + [{**passages(1)[0], "id": "twin-of-p0"}]))
    assert len(corpus) == 3 and "'p0' kept, 'twin-of-p0' dropped" in caplog.text
    index = ISORAGIndex.load(copy)
    update = index.add([twin, *passages(1, 70)])
    assert update.duplicate_ids == [("p5", "twin-of-p5")] and "'p5' kept, 'twin-of-p5' dropped" in update.summary()
    done = isorag("add", str(copy), str(write_jsonl(tmp_path / "twin.jsonl", [twin])))
    assert done.returncode == 0 and "'p5' kept, 'twin-of-p5' dropped" in done.stdout, done.stderr[-2000:]

def test_non_utf8_files_name_the_file_and_the_line(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"title": "A", "text": "plain"}\n{"title": "B", "text": "caf\xe9"}\n')
    with pytest.raises(DatasetFormatError, match=r"latin.jsonl: not UTF-8 text: byte 0xe9 on line 2 \(byte offset 59\)"):
        load_corpus(latin)
    csv_file = tmp_path / "latin.csv"
    csv_file.write_bytes(b"title,text\nA,plain\nB,caf\xe9\n")
    with pytest.raises(DatasetFormatError, match=r"latin.csv: not UTF-8 text: byte 0xe9 on line 3"):
        load_corpus(csv_file)
    done = isorag("index", str(latin), str(tmp_path / "out"))
    assert done.returncode == 1 and "line 2" in done.stderr and "Traceback" not in done.stderr

def test_an_unterminated_csv_quote_is_an_error_naming_the_record(tmp_path):
    path = tmp_path / "quote.csv"
    path.write_text('id,title,text\na,A,"fine"\nb,B,"never closed\nc,C,text\n')
    with pytest.raises(DatasetFormatError, match=r"quote.csv: record 1: malformed CSV .* starting on line 3"):
        load_corpus(path)

def test_an_oversized_passage_is_split_like_a_document_or_refused(tmp_path, caplog):
    huge = " ".join(f"Sentence {i} tells of Velmora." for i in range(200_000))  # ~6 MB
    assert len(huge) > MAX_PASSAGE_CHARS
    path = write_jsonl(tmp_path / "huge.jsonl", [{"id": "big", "title": "Big", "text": huge}, {"id": "small", "title": "S", "text": "small"}])
    with caplog.at_level(logging.WARNING):
        corpus, report = load_corpus(path, max_tokens=200)
    assert report.split_long == ["big"] and "over 20000 characters split" in caplog.text
    assert corpus[-1].id == "small" and corpus[0].id == "big#0" and len(corpus) > 1000
    assert max(len(p.text.split()) for p in corpus) <= 200
    assert " ".join(p.text for p in corpus[:-1]) == huge  # nothing lost
    with pytest.raises(ValueError, match=f"over the limit of {MAX_PASSAGE_CHARS}"):
        build([{"title": "Big", "text": huge}, {"title": "S", "text": "small"}])
