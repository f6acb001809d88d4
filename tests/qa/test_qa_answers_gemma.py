"""Answers with the packaged Gemma 3 270M through llama.cpp's server (slow tier): the product path
gives the harness's answers and EM/F1 on the same questions, `isorag ask` answers with the default
reader (tests/server/test_server_answers_gemma.py: `isorag serve` and `isorag ask --server`), and
benchmarks/answer.py runs end to end on a small synthetic corpus."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from index_helpers import build, passages

from isorag_pyg.datasets import Question
from isorag_pyg.qa import OpenAIChatGenerator, answer_questions
from isorag_pyg.qa.llama_server import LlamaServer
from isorag_pyg.qa.prompt import packaged_template
from isorag_pyg.qa.reader_spec import PACKAGED, ReaderSpec

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = ["Which town is known for craft number 5?", "How far is Kostrov 1 from Aldania 2?", "What is Velmora 0 known for?"]
GOLD = [["Quen 5"], ["7 miles"], ["craft number 0"]]


@pytest.mark.slow
def test_product_and_harness_give_the_same_answers_and_em_f1_with_gemma(llama_server_installed, gemma_gguf):
    index = build(passages(20))
    questions = [Question(f"q{i}", text, gold, []) for i, (text, gold) in enumerate(zip(QUESTIONS, GOLD))]
    with LlamaServer(gemma_gguf, alias="gemma-3-270m") as served:  # as benchmarks/qa.py asks it
        harness = OpenAIChatGenerator(served.base_url, served.model, concurrency=1, max_retries=2, timeout=600, temperature=0.0,
                                      max_tokens=PACKAGED["max_tokens"], stop=list(PACKAGED["stop"]))
        metrics, rows = answer_questions(harness, packaged_template("fewshot"), questions, index.retrieve(QUESTIONS, k=5))
    with ReaderSpec().make() as reader:
        product = index.answer(QUESTIONS, k=5, reader=reader)
        streamed = index.answer_stream(QUESTIONS[0], reader, k=5)
        pieces = list(streamed.pieces())
    assert [r["answer"] for r in rows] == [p["answer"] for p in product] and all(p["answer"] for p in product)
    assert "".join(pieces) == streamed.result["answer"] == product[0]["answer"]  # streamed greedy = whole greedy
    from isorag_pyg.qa import exact_match, token_f1
    from isorag_pyg.qa.citations import without_markers

    assert sum(exact_match(without_markers(p["answer"]), q.answers) for p, q in zip(product, questions)) / 3 == metrics["em"]
    assert sum(token_f1(without_markers(p["answer"]), q.answers) for p, q in zip(product, questions)) / 3 == metrics["f1"]
    for p in product:
        assert {c["id"] for c in p["citations"]} <= {q["id"] for q in p["passages"]}


@pytest.mark.slow
def test_answer_benchmark_script_runs_on_a_small_corpus(llama_server_installed, gemma_gguf, tmp_path):
    small = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
             "dataset.generator.num_questions=20", "trainer.max_epochs=2"]
    cmd = [sys.executable, "-m", "benchmarks.answer", "--datasets", "synthetic", "--questions", "2", "--retrievers", "dense", "iso",
           "--latency-questions", "2", "--clients", "1", "2", *(arg for o in small for arg in ("--override", o))]
    done = subprocess.run(cmd, check=False, cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "answer.json").read_text())
    assert result["complete"] and set(result["agreement"]["synthetic"]) >= {"dense", "iso", "n_questions"}
    for row in (result["agreement"]["synthetic"][name] for name in ("dense", "iso")):
        assert row["identical_passages"] == 1.0 and len(row["answers"]) == 2 and 0 <= row["citation_gold_hit"] <= row["citing_answers"] <= 1
        assert row["citations_inside_retrieved"] in (None, 1.0)
    assert {"post_answer_stream", "isorag_ask_server"} <= set(result["latency"])
    assert [row["clients"] for row in result["throughput"]] == [1, 2] and all(0 < row["reader_share"] <= 1 for row in result["throughput"])
