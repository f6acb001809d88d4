"""OpenIE through an OpenAI-compatible endpoint: parsing, the two-step requests, retries, the
unparseable-answer error, resume from the cache, and the real llama-cpp-python server with the
packaged Gemma 3 270M."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLM

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.graph.extraction import EntityExtractor, Extraction
from isorag_pyg.graph.openie import OpenIEError, OpenIEExtractor, parse_entities, parse_triples
from isorag_pyg.qa.llama_server import LlamaServer

REPO = Path(__file__).resolve().parents[2]
PASSAGES = [f"Town{i} is a town in Region{i % 3}, founded in {1800 + i}." for i in range(8)]


def openie_key(prompt: str) -> str:
    """``entities|<passage>`` or ``triples|<passage>``: the step and the passage a prompt asks about."""
    passage = prompt.rsplit("Passage: ", 1)[-1].split("\n")[0]
    return f"{'entities' if prompt.rstrip().endswith('Entities:') else 'triples'}|{passage}"


def scripted_answers(passages: list[str]) -> dict[str, str]:
    """What a perfect model answers for the passages above."""
    answers = {}
    for p in passages:
        town, region, year = p.split()[0], p.split()[5].rstrip(","), p.split()[-1].rstrip(".")
        answers[f"entities|{p}"] = json.dumps([town, region, year])
        answers[f"triples|{p}"] = json.dumps([[town, "located in", region], [town, "founded in", year], [region, "has", "roads"]])
    return answers


def extractor(server: FakeLLM, tmp_path, **kwargs) -> OpenIEExtractor:
    return OpenIEExtractor(server.base_url, "fake", cache_dir=tmp_path, **{"concurrency": 4, "backoff": 0.01, **kwargs})


def cached_lines(tmp_path) -> list[dict]:
    path = tmp_path / "openie.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("answer, expected", [
    (' ["Radio City", "India", 2001]', ["Radio City", "India", "2001"]),
    ("['Radio City', 'India']", ["Radio City", "India"]),
    ('```json\n["Radio City",\n "India"]\n```', ["Radio City", "India"]),
    (' ["Radio City", "India", "Radio City", "Hin', ["Radio City", "India"]),  # truncated: the whole items
    (" [Radio City, India]", ["Radio City", "India"]),
    (" []", []),
    ("Radio City and India", None),
])
def test_parse_entities(answer, expected):
    assert parse_entities(answer) == expected


@pytest.mark.parametrize("answer, expected", [
    (' [["A", "born in", "B"], ["A", "is", 1990], ["A", "only two"]]', [("A", "born in", "B"), ("A", "is", "1990")]),
    (' [["A", "born in", "B"], ["A", "born in", "B"], ["C", "wrote", "D"], ["E", "li', [("A", "born in", "B"), ("C", "wrote", "D")]),
    (" [[A, born in, B], [C, wrote]]", [("A", "born in", "B")]),
    (" []", []),
    ("A was born in B.", None),
])
def test_parse_triples(answer, expected):
    assert parse_triples(answer) == expected


def test_entities_then_triples_per_passage_in_order(tmp_path):
    texts = [*PASSAGES, "   ", PASSAGES[0]]  # an empty passage and a repeated one
    with FakeLLM(answers=scripted_answers(PASSAGES), key=openie_key) as server:
        ie = extractor(server, tmp_path, grounded=False)  # "roads", a triple's object, is in no passage
        assert isinstance(ie, EntityExtractor) and ie.name == "openie"
        out = ie.extract(texts)
    assert isinstance(out, Extraction) and len(out.entities) == len(out.triples) == len(texts)
    assert out.entities[0] == ["Town0", "Region0", "1800", "roads"]  # named entities, then the triples' objects
    assert out.triples[3] == [("Town3", "located in", "Region0"), ("Town3", "founded in", "1803"), ("Region0", "has", "roads")]
    assert out.entities[-2] == [] and out.triples[-2] == []
    assert out.entities[-1] == out.entities[0] and out.triples[-1] == out.triples[0]
    assert ie.calls == 2 * len(PASSAGES)  # the empty passage is not sent, the repeated one asked once
    assert sorted(server.completions) == sorted(scripted_answers(PASSAGES))
    assert len(cached_lines(tmp_path)) == 2 * len(PASSAGES)


def test_triples_are_asked_with_the_passages_entities_and_not_for_passages_without_any(tmp_path):
    answers = {**scripted_answers(PASSAGES), f"entities|{PASSAGES[1]}": " []"}
    prompts: list[str] = []

    def key(prompt: str) -> str:
        prompts.append(prompt)
        return openie_key(prompt)

    with FakeLLM(answers=answers, key=key) as server:
        out = extractor(server, tmp_path).extract(PASSAGES)
    assert out.entities[1] == [] and out.triples[1] == []
    assert f"triples|{PASSAGES[1]}" not in server.requests
    asked = next(p for p in prompts if openie_key(p) == f"triples|{PASSAGES[2]}")
    assert asked.endswith(f'Passage: {PASSAGES[2]}\nEntities: ["Town2", "Region2", "1802"]\nTriples:')


def test_entities_and_triples_not_in_the_passage_are_dropped(tmp_path):
    """A small model copies its few-shot examples' names ("Maeve Dunne", "Cork") into answers: grounding keeps them out."""
    copied = {f"entities|{PASSAGES[0]}": json.dumps(["Town0", "region0", "Maeve Dunne", "Ireland"]),
              f"triples|{PASSAGES[0]}": json.dumps([["Town0", "located in", "Region0"], ["Town0", "written by", "Maeve Dunne"],
                                                    ["Town0", "set in", "Cork"]])}
    with FakeLLM(answers={**scripted_answers(PASSAGES), **copied}, key=openie_key) as server:
        ie = extractor(server, tmp_path)
        out = ie.extract(PASSAGES)
        args = {"base_url": server.base_url, "model": "fake", "cache_dir": str(tmp_path)}
        index = ISORAGIndex.build([{"id": str(i), "title": "", "text": t} for i, t in enumerate(PASSAGES)], f_theta=None,
                                  graph={"entity_graph": {"extractor": "openie", "extractor_args": args}}, phi=PhiSpec(p=0.0), progress=False)
    assert out.entities[0] == ["Town0", "region0", "Region0"]  # compared as keys (case aside), kept as written
    assert out.triples[0] == [("Town0", "located in", "Region0")]
    assert out.entities[1] == ["Town1", "Region1", "1801"] and out.triples[1] == [("Town1", "located in", "Region1"), ("Town1", "founded in", "1801")]
    assert ie.ungrounded == out.ungrounded == {"entities": 3 + 7, "triples": 2 + 7}  # passage 0's three inventions; "roads" of the other seven
    # the index built from the same (cached) answers records what grounding dropped
    assert (index.statistics["entity_graph_ungrounded_entities"], index.statistics["entity_graph_ungrounded_triples"]) == (10, 9)


def test_chat_models_get_the_prompt_as_a_message(tmp_path):
    answers = {k: f"```json\n{v}\n```" for k, v in scripted_answers(PASSAGES[:2]).items()}
    with FakeLLM(answers=answers, key=openie_key) as server:
        out = extractor(server, tmp_path, chat=True).extract(PASSAGES[:2])
    assert out.triples[1][0] == ("Town1", "located in", "Region1")


def test_failures_are_retried_and_each_passage_is_answered_once(tmp_path):
    failures = {f"entities|{PASSAGES[0]}": ["500", "429"], f"triples|{PASSAGES[1]}": ["timeout", "malformed"]}
    with FakeLLM(failures, answers=scripted_answers(PASSAGES), key=openie_key, delay=4.0) as server:  # a real answer never nears 2 s
        out = extractor(server, tmp_path, timeout=2.0, max_retries=3).extract(PASSAGES)
    assert out.triples[1][0] == ("Town1", "located in", "Region1") and out.entities[0][:3] == ["Town0", "Region0", "1800"]
    assert server.requests[f"entities|{PASSAGES[0]}"] == 3 and server.requests[f"triples|{PASSAGES[1]}"] == 3
    assert all(n == 1 for n in server.completions.values())
    assert len(cached_lines(tmp_path)) == 2 * len(PASSAGES)


def test_garbage_answers_above_the_share_are_a_clear_error_and_stay_cached(tmp_path):
    garbage = {f"entities|{p}": "I cannot help with that." for p in PASSAGES[:3]}
    with FakeLLM(answers={**scripted_answers(PASSAGES), **garbage}, key=openie_key) as server:
        with pytest.raises(OpenIEError, match=r"3 of 8 passages \(38%\) got answers with no JSON list.*max_bad_share=20%"):
            extractor(server, tmp_path).extract(PASSAGES)
        assert len(cached_lines(tmp_path)) == len(PASSAGES)  # every entity answer kept
        tolerant = extractor(server, tmp_path, max_bad_share=0.5)
        out = tolerant.extract(PASSAGES)
    assert out.entities[:3] == [[], [], []] and out.triples[:3] == [[], [], []] and out.entities[3][0] == "Town3"
    assert tolerant.unparseable == {"entities": 3, "triples": 0}
    assert tolerant.calls == len(PASSAGES) - 3  # only the triples of the parseable passages were new


def test_an_interrupted_run_resumes_from_the_cache_without_asking_again(tmp_path):
    """The endpoint fails for good mid-run: a clear error, the answers received stay cached, and
    the rerun asks only for the rest."""
    broken = {f"entities|{PASSAGES[5]}": ["500"] * 10}
    with FakeLLM(broken, answers=scripted_answers(PASSAGES), key=openie_key) as server:
        with pytest.raises(OpenIEError, match=r"OpenIE stopped \(entities\).*after 2 attempt.*cached in .*openie.jsonl; rerun to resume"):
            extractor(server, tmp_path, max_retries=1, concurrency=1).extract(PASSAGES)
        assert f"entities|{PASSAGES[7]}" not in server.requests  # what was not sent yet is cancelled
    kept = cached_lines(tmp_path)
    assert 5 <= len(kept) <= 6  # the passages before the failing one (and the one in flight)
    with FakeLLM(answers=scripted_answers(PASSAGES), key=openie_key) as server:
        resumed = extractor(server, tmp_path)
        out = resumed.extract(PASSAGES)
        assert resumed.calls == 2 * len(PASSAGES) - len(kept) and not any(f"entities|{p}" in server.requests for p in PASSAGES[:5])
    with FakeLLM(answers=scripted_answers(PASSAGES), key=openie_key) as server:
        assert extractor(server, tmp_path / "fresh").extract(PASSAGES) == out


def test_unreachable_endpoint_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    ie = OpenIEExtractor(f"http://127.0.0.1:{port}/v1", "fake", cache_dir=tmp_path, max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(OpenIEError, match="cannot reach the generator at http://127.0.0.1"):
        ie.extract(PASSAGES[:2])


def test_slow_endpoint_is_a_clear_error_and_keeps_what_arrived(tmp_path):
    slow = {f"entities|{PASSAGES[1]}": ["timeout"] * 5}
    with FakeLLM(slow, answers=scripted_answers(PASSAGES), key=openie_key, delay=1.0) as server, \
            pytest.raises(OpenIEError, match=r"OpenIE stopped \(entities\): the generator at .* did not answer within 0.3 s\. The answers"):
        extractor(server, tmp_path, timeout=0.3, max_retries=1, concurrency=1).extract(PASSAGES[:2])
    assert [line["answer"] for line in cached_lines(tmp_path)] == [scripted_answers(PASSAGES)[f"entities|{PASSAGES[0]}"]]


def test_bad_share_outside_zero_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max_bad_share"):
        OpenIEExtractor("http://127.0.0.1:1/v1", "fake", cache_dir=tmp_path, max_bad_share=1.5)


def test_entity_graph_builder_takes_openie_by_name_and_updates_ask_only_for_new_passages(tmp_path):
    with FakeLLM(answers=scripted_answers(PASSAGES), key=openie_key) as server:
        args = {"base_url": server.base_url, "model": "fake", "cache_dir": str(tmp_path), "backoff": 0.01, "grounded": False}
        graph = {"entity_graph": {"extractor": "openie", "extractor_args": args}}
        index = ISORAGIndex.build([{"id": str(i), "title": "", "text": t} for i, t in enumerate(PASSAGES[:6])], graph=graph,
                                  f_theta=None, phi=PhiSpec(p=0.0), progress=False)
        index.add([{"id": str(i), "title": "", "text": t} for i, t in enumerate(PASSAGES[6:], 6)])
        assert all(n == 1 for n in server.completions.values()) and len(server.completions) == 2 * len(PASSAGES)
    names = index.graph.entity_names  # a town or a year is in one passage only: no node
    assert sorted(names) == ["Region0", "Region1", "Region2", "roads"]
    node = {name: len(index) + i for i, name in enumerate(names)}
    src, dst = index.graph.edge_index
    assert sorted(src[dst == node["Region0"]].tolist()) == [0, 3, 6, node["roads"]]  # mentions, and the triple (Region0, has, roads)
    hits = index.retrieve(["Which town lies in Region0?"], k=5, retriever="iso")[0]
    assert len(hits) == 5 and {h.id for h in hits} <= {str(i) for i in range(len(PASSAGES))}  # passages only are ranked


@pytest.mark.slow
@pytest.mark.llama_server
def test_openie_with_the_packaged_gemma_behind_the_real_server(llama_server_installed, gemma_gguf, tmp_path):
    """The real path: llama-cpp-python's server, the packaged Gemma 3 270M, completion prompts.
    Its triples are poor; what must hold is that the answers parse, name things that are in the
    passages, and are cached so a rerun sends nothing."""
    passages = ["Paris is the capital and largest city of France.",
                "The Beatles were an English rock band formed in Liverpool in 1960.",
                "Mount Everest is the highest mountain above sea level, in the Himalayas."]
    with LlamaServer(gemma_gguf, alias="gemma-3-270m") as server:
        ie = OpenIEExtractor(server.base_url, server.model, cache_dir=tmp_path, concurrency=1, max_tokens=96)
        out = ie.extract(passages)
        assert ie.calls >= len(passages)
        again = OpenIEExtractor(server.base_url, server.model, cache_dir=tmp_path, concurrency=1, max_tokens=96)
        assert again.extract(passages) == out and again.calls == 0
    named = [e for entities, text in zip(out.entities, passages) for e in entities if e.lower() in text.lower()]
    assert len(named) >= len(passages), out


@pytest.mark.slow
@pytest.mark.llama_server
def test_openie_benchmark_script_on_two_passages(llama_server_installed, gemma_gguf, shared_data, tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.openie", "--passages", "2", "--max-tokens", "64"], check=False, cwd=REPO,
                          env={**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path), "ISORAG_DATA_DIR": str(shared_data)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "openie.json").read_text())
    assert result["passages"] == 2 and result["passages_per_second"] > 0 and 2 <= result["requests"] <= 4
    assert set(result["unparseable_answers"]) == {"entities", "triples"} and len(result["examples"]) == 2


@pytest.mark.slow
@pytest.mark.llama_server
def test_blank_titles_openie_benchmark_on_one_question(llama_server_installed, gemma_gguf, shared_data, tmp_path):
    """The entity graphs over one HotpotQA question's ten passages, titles blanked; a rerun asks the model nothing new."""
    command = [sys.executable, "-m", "benchmarks.blank_titles_openie", "--datasets", "hotpotqa", "--dev-questions", "1", "--cache-dir", str(tmp_path / "cache")]
    env = {**os.environ, "ISORAG_BENCH_RESULTS": str(tmp_path), "ISORAG_DATA_DIR": str(shared_data)}
    for _ in range(2):
        done = subprocess.run(command, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["extractor"]: r for r in json.loads((tmp_path / "blank_titles_openie.json").read_text())["results"]}
    assert set(rows) == {"rules", "openie", "openie_ungrounded"}
    assert rows["openie"]["statistics"]["passages"] == rows["rules"]["statistics"]["passages"] == 10
    assert rows["openie"]["statistics"]["entities"] > 0 and rows["openie"]["build_seconds"] < rows["rules"]["build_seconds"] + 60  # cached
    assert set(rows["openie"]["ungrounded"]) == {"entities", "triples"} and rows["rules"]["ungrounded"] is None
    for row in rows.values():
        assert set(row["metrics"]) == {"dense", "ppr", "iso", "iso_uniform", "iso_shuffled"}
        assert all(0.0 <= m["recall@5"] <= m["recall@10"] <= 1.0 for m in row["metrics"].values())
