"""benchmarks/docs_questions.py: the docs copy it indexes leaves out the text that quotes its
answers, and the script runs on this repository's docs as a user would."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_llm_server import FakeLLM

from benchmarks import docs_questions
from benchmarks.docs_questions import (
    NO_CODE,
    NO_LEXICAL,
    OWN_PAGE,
    QUESTIONS,
    RECORD_START,
    RETRIEVERS,
    TRAIN_QUESTIONS,
    docs_without_answers,
    first_rank,
    main,
    summary,
)
from isorag_pyg.qa.generators import GeneratorError
from isorag_pyg.qa.llama_server import ServerError
from isorag_pyg.qa.reader_spec import HOW_TO_GET_ONE, ReaderSpec, ReaderUnavailable

REPO = Path(__file__).resolve().parents[2]


def test_the_indexed_copy_leaves_out_the_ask_record_and_the_benchmarks_own_page(tmp_path):
    docs = tmp_path / "docs"
    (docs / "benchmarks").mkdir(parents=True)
    (docs / "index.md").write_text(f"# Index\n\n## Answers\n\nKept.\n\n{RECORD_START} quoted answers\n\nmore of it\n\n## Next\n\nKept too.\n")
    (docs / OWN_PAGE).write_text("# Docs questions\n\nthe questions and their ranks\n")
    (docs / "server.md").write_text("# Server\n\n| flag | default |\n|---|---|\n| `--max-k` | `100` |\n")
    copy = docs_without_answers(docs, tmp_path / "out")
    assert (copy / "index.md").read_text() == "# Index\n\n## Answers\n\nKept.\n\n\n## Next\n\nKept too.\n"
    assert not (copy / OWN_PAGE).exists() and (copy / "server.md").read_text() == (docs / "server.md").read_text()
    assert (docs / OWN_PAGE).exists()  # the original is untouched
    # docs without the record are refused: the marker moved, and the benchmark would index its answers
    (docs / "index.md").write_text("# Index\n\nno record\n")
    with pytest.raises(SystemExit, match="RECORD_START"):
        docs_without_answers(docs, tmp_path / "again")


def test_training_questions_are_other_questions_than_the_reported_ones():
    asked = {q for q, _, _, _ in QUESTIONS}
    assert TRAIN_QUESTIONS and not asked & {q for q, _, _, _ in TRAIN_QUESTIONS}
    assert not {(f, n) for _, f, n, _ in QUESTIONS} & {(f, n) for _, f, n, _ in TRAIN_QUESTIONS}  # nor about the same rows


def test_a_reader_is_named_for_answers_only_and_a_missing_one_fails_before_the_index_is_built(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["docs_questions", "--llm-model", "x"])
    with pytest.raises(SystemExit, match="add --answers"):
        main()
    monkeypatch.setattr(sys, "argv", ["docs_questions", "--answers", "--llm-model", "x"])
    with pytest.raises(SystemExit, match=r"^--answers: an OpenAI-compatible reader needs a base URL and a model name"):
        main()

    class Unstartable:  # a packaged reader whose llama.cpp server does not start
        def __init__(self):
            self.closed = False

        @property
        def generator(self):
            raise ServerError("the llama.cpp server exited before it was ready")

        def close(self):
            self.closed = True

    made = Unstartable()
    monkeypatch.setattr(ReaderSpec, "make", lambda spec: made)
    monkeypatch.setattr(docs_questions, "measure", lambda *args: pytest.fail("the index was built without a reader"))
    monkeypatch.setattr(sys, "argv", ["docs_questions", "--answers"])
    with pytest.raises(SystemExit, match=r"^--answers: the llama.cpp server exited before it was ready$"):
        main()
    assert made.closed

    def unavailable(spec):
        raise ReaderUnavailable(HOW_TO_GET_ONE)

    monkeypatch.setattr(ReaderSpec, "make", unavailable)
    monkeypatch.setattr(docs_questions, "measure", lambda *args: pytest.fail("the index was built without a reader"))
    monkeypatch.setattr(sys, "argv", ["docs_questions", "--answers"])
    with pytest.raises(SystemExit, match=r"^--answers: no reader is installed: pip install"):
        main()

    closed = []  # a reader that fails mid-run: one line, and the reader is stopped
    monkeypatch.setattr(ReaderSpec, "make", lambda spec: SimpleNamespace(generator=object(), close=lambda: closed.append(True)))
    monkeypatch.setattr(docs_questions, "measure", lambda *args: (_ for _ in ()).throw(GeneratorError("cannot reach the generator")))
    with pytest.raises(SystemExit, match=r"^--answers: cannot reach the generator$"):
        main()
    assert closed == [True]


def test_ranks_and_their_summary():
    assert first_rank(["a", "b", "c"], {"c", "b"}) == 2 and first_rank(["a"], {"z"}) is None
    assert summary([1, 6, None, 12]) == {"top5": 1, "top10": 2, "mrr": pytest.approx((1 + 1 / 6 + 1 / 12) / 4), "ranks": [1, 6, None, 12]}


@pytest.mark.slow
def test_the_benchmark_ranks_every_question_on_this_repositorys_docs(tmp_path):
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}
    # the reader answers each question with its needle (the answer's words only gold passages hold), the last one with nothing
    answers = {q: n for q, _, n, _ in QUESTIONS[:-1]} | {QUESTIONS[-1][0]: "the documents do not contain the answer"}
    with FakeLLM(answers=answers) as llm:
        done = subprocess.run([sys.executable, "-m", "benchmarks.docs_questions", "--answers", "--llm-base-url", llm.base_url, "--llm-model", "fake"],
                              cwd=REPO, env=env, check=True, capture_output=True, text=True)
    result = json.loads((tmp_path / "docs_questions.json").read_text())
    # an answer cites a gold passage exactly when ISO-RAG's 5 held one and the answer is the needle
    asked, iso_ranks = result["answers"], result["retrievers"]["iso"]["ranks_asked"]
    assert asked["reader"] == "fake" and asked["gold_given"] == result["retrievers"]["iso"]["top5_asked"]
    assert [a["cites_gold"] for a in asked["answers"]] == [r is not None for r in iso_ranks[:-1]] + [False]
    assert asked["cite_gold"] == sum(r is not None for r in iso_ranks[:-1]) > len(QUESTIONS) // 2
    assert asked["answers"][-1]["cited"] == [] and [a["question"] for a in asked["answers"]] == [q for q, _, _, _ in QUESTIONS]
    assert f"fake: {asked['cite_gold']} of {len(QUESTIONS)} answers cite a gold passage" in done.stdout
    # every question's needle is still in the docs (the script fails otherwise) and each names its gold passages
    assert [q["question"] for q in result["questions"]] == [q for q, _, _, _ in QUESTIONS]
    assert all(q["gold"] and all(g.startswith(q["file"] + "#") for g in q["gold"]) for q in result["questions"])
    # the docs write code: the automatic graph reads it, ISO-RAG's ranking is a hybrid with BM25, and both ablations run
    assert result["graph"]["entity_graph"]["extractor_args"]["code_spans"] is True
    assert result["knobs"]["iso"]["lexical_weight"] > 0
    assert set(result["retrievers"]) == {*RETRIEVERS, NO_LEXICAL, NO_CODE}
    for name, row in result["retrievers"].items():
        assert len(row["ranks"]) == len(QUESTIONS)
        assert row == summary(row["ranks"]) | {"mrr": pytest.approx(row["mrr"]), "top5_asked": row["top5_asked"], "ranks_asked": row["ranks_asked"]}
        assert row["top5_asked"] == sum(r is not None for r in row["ranks_asked"]) and len(row["ranks_asked"]) == len(QUESTIONS)
        if name in ("dense", "bm25", "ppr"):  # their rankings do not depend on k: the 5 asked for are the top 5 of 100
            assert row["ranks_asked"] == [r if r is not None and r <= 5 else None for r in row["ranks"]]
        assert f"{name:16s} {row['top5_asked']:>6d} {row['top5']:>6d}" in done.stdout
    # the questions are answerable from the docs: the best retriever finds most of them
    assert max(row["top10"] for row in result["retrievers"].values()) >= len(QUESTIONS) // 2
