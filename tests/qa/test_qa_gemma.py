"""QA with a real reader: the packaged Gemma 3 270M GGUF through transformers, and behind a real
llama-cpp-python OpenAI-compatible server queried by the project's client (answers, token counts,
resume after an interrupted client, a server that dies mid-run, evaluate.py end to end)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from isorag_pyg.datasets import Passage, Question
from isorag_pyg.jobs.evaluate import run_evaluation
from isorag_pyg.qa import GeneratorError, OpenAIChatGenerator, PromptTemplate, TransformersGenerator, answer_questions
from isorag_pyg.qa.answer_cache import request_key
from isorag_pyg.qa.llama_server import LlamaServer
from isorag_pyg.qa.models import load_gguf, packaged_gemma

REPO = Path(__file__).resolve().parents[2]
CONF = str(REPO / "conf")
CAPITALS = [("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"),
            ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Peru", "Lima")]
SMALL = ["dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
         "dataset.generator.num_questions=20", "trainer.max_epochs=2", "retriever=dense", "traces=false", "max_questions=3"]


def capital_questions() -> tuple[list[Question], list[list[Passage]]]:
    """Questions whose passage states the answer, before or after an unrelated passage."""
    qs, passages = [], []
    other = Passage("d", "Mount Everest", "Mount Everest is the highest mountain above sea level, in the Himalayas.")
    for i, (country, city) in enumerate(CAPITALS):
        qs.append(Question(f"c{i}", f"What is the capital of {country}?", [city], [f"p{i}"]))
        gold = Passage(f"p{i}", city, f"{city} is the capital and largest city of {country}.")
        passages.append([gold, other] if i % 2 else [other, gold])
    return qs, passages


def qa_config(name: str, *overrides: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("eval", overrides=[f"qa={name}", "paths.output_dir=.", *overrides]).qa


def fewshot() -> PromptTemplate:
    return PromptTemplate(**OmegaConf.to_container(qa_config("gguf").template, resolve=True))


def served_generator(server: LlamaServer, cache: Path | None = None, **kwargs) -> OpenAIChatGenerator:
    """The client as qa=openai_base configures it, pointed at ``server``."""
    cfg = qa_config("openai_base")
    params = {"concurrency": cfg.concurrency, "max_retries": cfg.max_retries, "timeout": cfg.timeout, "backoff": 0.05,
                  "temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "cache_path": cache, "stop": list(cfg.stop)}
    return OpenAIChatGenerator(server.base_url, server.model, **{**params, **kwargs})


def cached_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_packaged_model_lives_in_the_cache_and_a_damaged_copy_is_replaced(gemma_gguf, tmp_path):
    assert REPO not in gemma_gguf.parents
    damaged = tmp_path / gemma_gguf.name
    damaged.write_bytes(b"torn download")
    assert packaged_gemma(tmp_path) == damaged and damaged.stat().st_size == gemma_gguf.stat().st_size
    assert not list(tmp_path.glob(".assemble-*"))


@pytest.mark.slow
def test_transformers_reads_the_gguf_with_batched_left_padding(gemma_gguf):
    qs, passages = capital_questions()
    template = fewshot()
    cfg = qa_config("gguf")
    reader = TransformersGenerator(gemma_gguf, max_new_tokens=cfg.max_tokens, batch_size=4, stop=list(cfg.stop))
    metrics, rows = answer_questions(reader, template, qs, passages)
    assert metrics["em"] >= 0.75, rows  # the passages state the answer
    assert all("\n" not in r["answer"] and r["answer"] for r in rows)
    tokenizer, _ = load_gguf(gemma_gguf)
    assert rows[0]["prompt_tokens"] == len(tokenizer(template.request(qs[0].text, passages[0])).input_ids)
    one_by_one = TransformersGenerator(gemma_gguf, max_new_tokens=cfg.max_tokens, batch_size=1, stop=list(cfg.stop))
    assert [r["answer"] for r in one_by_one.generate([template.request(q.text, p) for q, p in zip(qs[:3], passages[:3])])] == \
        [r["answer"] for r in rows[:3]]  # padding changes nothing


@pytest.mark.slow
def test_evaluate_py_with_qa_gguf(gemma_gguf, tmp_path):
    cmd = [sys.executable, "evaluate.py", "qa=gguf", f"hydra.run.dir={tmp_path}", "encoder.show_progress=false", *SMALL]
    done = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["qa_questions"] == 3 and 0.0 <= metrics["f1"] <= 1.0 and metrics["avg_prompt_tokens"] > 200  # few-shot prompt
    assert "local model" in metrics["prompt_token_counter"]
    predictions = [json.loads(line) for line in (tmp_path / "qa_predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 3 and all("\n" not in p["answer"] for p in predictions)
    assert not list(REPO.rglob("*.gguf"))


@pytest.fixture(scope="module")
def server(llama_server_installed, gemma_gguf):
    with LlamaServer(gemma_gguf, alias="gemma-3-270m") as running:
        yield running


@pytest.mark.slow
@pytest.mark.llama_server
def test_server_answers_over_the_completions_endpoint(server, gemma_gguf):
    qs, passages = capital_questions()
    template = fewshot()
    before = len(server.timings())
    metrics, rows = answer_questions(served_generator(server), template, qs, passages)
    assert metrics["em"] >= 0.75, rows
    timings = server.timings()[before:]  # llama.cpp's account of each completion, from the server's log
    assert len(timings) == len(qs) and all(t.prompt_tokens > 0 and t.prompt_ms > 0 for t in timings)
    assert all(t.prompt_tokens < r["prompt_tokens"] for t, r in zip(timings[1:], rows[1:]))  # the few-shot prefix is reused
    assert "usage.prompt_tokens" in metrics["prompt_token_counter"]
    tokenizer, _ = load_gguf(gemma_gguf)  # the server counts prompt tokens with the same vocabulary and BOS
    assert [r["prompt_tokens"] for r in rows] == [len(tokenizer(template.request(q.text, p)).input_ids) for q, p in zip(qs, passages)]


@pytest.mark.slow
@pytest.mark.llama_server
def test_evaluate_with_qa_openai_base_against_the_server(server, tmp_path):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("eval", overrides=[f"paths.output_dir={tmp_path}", *SMALL, "qa=openai_base", f"qa.base_url={server.base_url}"])
        summary = run_evaluation(cfg)
    assert summary["qa_questions"] == 3 and summary["avg_prompt_tokens"] > 200
    assert len(cached_lines(tmp_path / "qa_answers.jsonl")) == 3


CLIENT = """
import json, sys
from isorag_pyg.datasets import Passage, Question
from isorag_pyg.qa import OpenAIChatGenerator, PromptTemplate, answer_questions
spec = json.load(open(sys.argv[1]))
qs = [Question(**q) for q in spec["questions"]]
passages = [[Passage(**p) for p in row] for row in spec["passages"]]
gen = OpenAIChatGenerator(spec["base_url"], spec["model"], concurrency=1, max_tokens=16, stop=["\\n"], cache_path=spec["cache"])
answer_questions(gen, PromptTemplate(**spec["template"]), qs, passages)
"""


@pytest.mark.slow
@pytest.mark.llama_server
def test_interrupted_client_resumes_from_the_cache(server, tmp_path):
    """A client killed mid-run keeps what it had; the rerun asks only for the rest."""
    qs, passages = capital_questions()
    template, cache = fewshot(), tmp_path / "answers.jsonl"
    spec = {"questions": [q.__dict__ for q in qs], "passages": [[p.__dict__ for p in row] for row in passages], "base_url": server.base_url,
            "model": server.model, "cache": str(cache), "template": {**template.__dict__, "examples": list(template.examples)}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(tmp_path / "spec.json")], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(cached_lines(cache)) < 3 and client.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    client.send_signal(signal.SIGKILL)
    client.wait()
    kept = len(cached_lines(cache))
    assert 3 <= kept < len(qs), "the client should have been interrupted mid-run"
    resumed = served_generator(server, cache)
    metrics, rows = answer_questions(resumed, template, qs, passages)
    assert resumed.calls == len(qs) - kept  # nothing asked twice
    lines = cached_lines(cache)
    assert len(lines) == len({line["key"] for line in lines}) == len(qs)  # nothing lost, nothing double-counted
    # each question gets the answer cached under its own request, the killed client's included (compared with the cache,
    # not with a fresh run: llama.cpp's greedy answers can differ with the prompt prefix its server reuses)
    answer_of = {line["key"]: line["answer"] for line in lines}
    keys = [request_key(resumed.model, template.request(q.text, p), resumed.params) for q, p in zip(qs, passages)]
    assert [r["answer"] for r in rows] == [answer_of[key] for key in keys]
    assert {line["key"] for line in lines[:kept]} <= set(keys) and metrics["em"] >= 0.5


@pytest.mark.slow
@pytest.mark.llama_server
def test_server_dying_mid_run_is_a_clear_error_and_keeps_the_answers(llama_server_installed, gemma_gguf, tmp_path):
    qs, passages = capital_questions()
    template, cache = fewshot(), tmp_path / "answers.jsonl"
    with LlamaServer(gemma_gguf) as dying:
        def kill_after_two_answers():
            while len(cached_lines(cache)) < 2:
                time.sleep(0.02)
            dying.process.kill()

        killer = threading.Thread(target=kill_after_two_answers, daemon=True)
        killer.start()
        with pytest.raises(GeneratorError, match="cannot reach the generator"):
            answer_questions(served_generator(dying, cache, max_retries=2), template, qs, passages)
        killer.join(timeout=5)
    kept = len(cached_lines(cache))
    assert 2 <= kept < len(qs)
    with LlamaServer(gemma_gguf) as restarted:
        resumed = served_generator(restarted, cache)
        metrics, _ = answer_questions(resumed, template, qs, passages)
    assert resumed.calls == len(qs) - kept and metrics["qa_questions"] == len(qs)
    assert len(cached_lines(cache)) == len(qs)


@pytest.mark.slow
@pytest.mark.llama_server
def test_qa_benchmark_script_runs_on_a_small_corpus(llama_server_installed, gemma_gguf, tmp_path):
    overrides = [arg for o in SMALL[:5] for arg in ("--override", o)]
    cmd = [sys.executable, "-m", "benchmarks.qa", "--datasets", "synthetic", "--max-questions", "3", "--rows", "closed_book", "dense", "oracle",
           "--agreement", "1", *overrides]
    done = subprocess.run(cmd, check=False, cwd=REPO, env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "qa.json").read_text())
    assert result["complete"] and result["results"]["synthetic"]["n_questions"] == 3
    rows = result["results"]["synthetic"]["templates"]["fewshot"]
    assert set(rows) == {"closed_book", "dense", "oracle"} and rows["oracle"]["answer_in_passages"] >= rows["closed_book"]["answer_in_passages"]
    assert all(len(r["answers"]) == 3 and r["avg_prompt_tokens"] > 200 for r in rows.values())
    assert all(r["prompt_tokens_per_s"] > 0 and r["generation_tokens_per_s"] > 0 for r in rows.values())  # llama.cpp's own timings
    assert result["results"]["synthetic"]["agreement"]["prompts"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--out", "benchmarks/results/qa.json"], "expected a file name ending in .json"),
    (["--max-questions", "0"], "--max-questions, --servers and --threads must be >= 1"),
    (["--servers", "0"], "--max-questions, --servers and --threads must be >= 1"),
    (["--threads", "0"], "--max-questions, --servers and --threads must be >= 1"),
])
def test_qa_benchmark_refuses_bad_arguments_before_it_starts(tmp_path, args, message):
    """A path for ``--out`` would only fail when the results are written, after the whole run;
    ``--max-questions 0`` would have run every question: both are refused at once."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.qa", *args], check=False, cwd=REPO,
                          env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.llama_server
@pytest.mark.shared_data
def test_reader_speed_benchmark_compares_settings_on_the_same_prompts(llama_server_installed, gemma_gguf, shared_data, tmp_path):
    cmd = [sys.executable, "-m", "benchmarks.reader_speed", "--questions", "2", "--configs", "legacy", "threads=1"]
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path), "ISORAG_DATA_DIR": str(shared_data)}
    done = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "reader_speed.json").read_text())
    legacy, tuned = result["runs"]
    assert legacy["settings"]["logits_all"] and not tuned["settings"]["logits_all"] and legacy["prompt_speedup"] == 1.0
    assert tuned["same_answers"] == 1.0 and tuned["answers"] == legacy["answers"]  # logits of the last token only: same greedy answers
    assert all(r["prompt_tokens_per_s"] > 0 and r["evaluated_prompt_tokens"] <= r["prompt_tokens"] for r in result["runs"])
