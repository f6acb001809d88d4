"""The hydra ``qa`` configs build the same reader object as ``isorag ask`` and the server: each
``conf/qa/*.yaml`` composes into the :class:`ReaderSpec` it describes, evaluate.py asks that
reader (its generator, in its template), and a bad or plugin kind goes through the spec."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fake_llm_server import FakeLLM
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from isorag_pyg.datasets import Passage, Question
from isorag_pyg.jobs.config import reader_spec
from isorag_pyg.jobs.evaluate import answer_with_llm
from isorag_pyg.qa import OpenAIChatGenerator
from isorag_pyg.qa.generators import READERS
from isorag_pyg.qa.prompt import PromptTemplate, packaged_template
from isorag_pyg.qa.reader_spec import KINDS, Reader, ReaderSpec

CONF = Path(__file__).resolve().parents[2] / "conf"
#: conf/qa/<name>.yaml -> (kind, template, max_tokens, stop, the spec's other settings that differ from its defaults)
EXPECTED = {
    "gguf": ("transformers", "fewshot", 16, ("\n",), {}),
    "openai": ("openai", "default", 64, None, {"base_url": "http://localhost:8000/v1", "model": "Qwen/Qwen2.5-7B-Instruct",
                                               "concurrency": 8, "max_retries": 5, "timeout": 60.0}),
    "openai_base": ("openai", "fewshot", 16, ("\n",), {"base_url": "http://localhost:8000/v1", "model": "gemma-3-270m",
                                                       "concurrency": 1, "max_retries": 5, "timeout": 60.0}),
    "transformers": ("transformers", "default", 64, None, {"model_path": "/models/small"}),
}


def qa_config(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("eval", overrides=["paths.output_dir=.", *overrides]).qa


def test_every_qa_config_is_covered():
    assert {path.stem for path in (CONF / "qa").glob("*.yaml")} == {*EXPECTED, "none"}
    assert qa_config("qa=none") is None  # evaluate.py asks no reader


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_qa_config_composes_into_the_reader_spec_it_describes(name, tmp_path):
    kind, template, max_tokens, stop, settings = EXPECTED[name]
    extra = ["qa.model_path=/models/small"] if name == "transformers" else []
    spec = reader_spec(qa_config(f"qa={name}", *extra), tmp_path)
    cache = tmp_path / "qa_answers.jsonl" if kind == "openai" else None
    changed = {f.name: getattr(spec, f.name) for f in dataclasses.fields(ReaderSpec)
               if f.name not in ("kind", "template", "max_tokens", "stop", "cache_path") and getattr(spec, f.name) != f.default
               and not (f.name == "options" and not spec.options)}
    assert (spec.kind, spec.max_tokens, spec.stop, spec.cache_path, changed) == (kind, max_tokens, stop, cache, settings)
    assert dataclasses.replace(spec.template, examples=tuple(spec.template.examples)) == packaged_template(template)
    reader = Reader(spec)
    assert (reader.template, reader.max_tokens, reader.stop) == (spec.template, max_tokens, stop or ())


def test_an_openai_config_makes_the_client_it_describes(tmp_path):
    cfg = qa_config("qa=openai_base", "qa.cache_path=" + str(tmp_path / "answers.jsonl"), "qa.backoff=0.5", "qa.temperature=0.2")
    generator = reader_spec(cfg, tmp_path / "run").make().generator
    assert isinstance(generator, OpenAIChatGenerator)
    assert (generator.base_url, generator.model, generator.concurrency, generator.max_retries, generator.backoff) == \
           ("http://localhost:8000/v1", "gemma-3-270m", 1, 5, 0.5)
    assert generator.params == {"temperature": 0.2, "max_tokens": 16, "stop": ["\n"]}
    assert generator.cache.path == tmp_path / "answers.jsonl" and generator.client.timeout == 60.0


def test_a_transformers_config_makes_its_local_model_and_needs_model_path(tmp_path, monkeypatch):
    from isorag_pyg.qa import models
    from isorag_pyg.qa import reader_spec as module

    made = []
    monkeypatch.setattr(module, "TransformersGenerator", lambda *args, **kwargs: made.append((args, kwargs)) or "generator")
    monkeypatch.setattr(models, "packaged_gemma", lambda: "/models/packaged.gguf")
    assert reader_spec(qa_config("qa=gguf", "qa.device=cpu", "qa.batch_size=4"), tmp_path).make().generator == "generator"
    assert made == [(("/models/packaged.gguf", 16), {"device": "cpu", "batch_size": 4, "stop": ["\n"]})]
    with pytest.raises(MissingMandatoryValue, match="qa.model_path"):
        reader_spec(qa_config("qa=transformers"), tmp_path)


def test_the_cli_and_server_readers_keep_their_request_settings():
    """``isorag ask``/``serve``: a remote endpoint asked 4 at a time without retries, the packaged
    server one at a time with 2 retries, greedily, without an answer cache."""
    openai = ReaderSpec.from_flags(None, "http://h/v1", "m", None).make().generator
    assert (openai.concurrency, openai.max_retries, openai.backoff, openai.cache.path) == (4, 0, 1.0, None)
    assert openai.params == {"temperature": 0.0, "max_tokens": 64}
    packaged = Reader(ReaderSpec())._client_settings()
    assert {key: packaged[key] for key in ("concurrency", "max_retries", "temperature", "cache_path", "max_tokens", "stop")} == \
           {"concurrency": 1, "max_retries": 2, "temperature": 0.0, "cache_path": None, "max_tokens": 16, "stop": ["\n"]}


def test_evaluate_asks_the_readers_generator_in_its_template(tmp_path, monkeypatch):
    questions = [Question("q0", "Who wrote Emma?", ["Jane Austen"], ["1"]), Question("q1", "Where is Paris?", ["France"], ["0"])]
    passages = [Passage("0", "Paris", "Paris is in France."), Passage("1", "Emma", "Emma is a novel by Jane Austen.")]
    inputs = SimpleNamespace(index=SimpleNamespace(passages=passages), dataset=SimpleNamespace(questions=questions))
    result = SimpleNamespace(indices=torch.tensor([[1, 0], [0, 1]]))
    for name, chat in (("openai_base", False), ("openai", True)):
        out = tmp_path / name
        out.mkdir()
        with FakeLLM() as server:
            cfg = OmegaConf.create({"qa": qa_config(f"qa={name}", f"qa.base_url={server.base_url}", "qa.top_k=1")})
            metrics = answer_with_llm(cfg, inputs, result, out)
        template = packaged_template("fewshot" if name == "openai_base" else "default")
        sent = [body["messages"] if chat else body["prompt"] for body in server.seen]
        assert sorted(map(str, sent)) == sorted(str(template.request(q.text, [passages[row[0]]])) for q, row in zip(questions, [[1], [0]]))
        assert metrics["qa_questions"] == 2 and len((out / "qa_predictions.jsonl").read_text().splitlines()) == 2
        assert len((out / "qa_answers.jsonl").read_text().splitlines()) == 2  # the default cache, in the run folder
    mine = PromptTemplate(system=None, user="MINE {passages} Question: {question}\nAnswer:", passage="{text}")
    monkeypatch.setattr(ReaderSpec, "decoding", lambda self: (mine, 16, ("\n",)))  # the reader's template, not cfg.qa.template
    with FakeLLM() as server:
        answer_with_llm(OmegaConf.create({"qa": qa_config("qa=openai_base", f"qa.base_url={server.base_url}", "qa.top_k=1")}),
                        inputs, result, tmp_path)
    assert sorted(body["prompt"] for body in server.seen) == sorted(mine.request(q.text, [passages[i]]) for q, i in zip(questions, (1, 0)))


def test_a_bad_kind_is_an_error_naming_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown reader kind 'gpt'; choose from gguf, openai, transformers, none$"):
        reader_spec(qa_config("qa=openai", "qa.kind=gpt"), tmp_path)
    with pytest.raises(ValueError, match="a 'openai' reader takes the spec's own fields"):
        ReaderSpec(kind="openai", base_url="http://h/v1", model="m", options={"x": 1})


class EchoReader:
    """A plugin's reader: answers every request with its greeting."""

    token_counter = "none"

    def __init__(self, greeting: str, max_tokens: int = 8):
        self.greeting, self.max_tokens = greeting, max_tokens

    def generate(self, requests):
        return [{"answer": self.greeting, "prompt_tokens": None} for _ in requests]


@pytest.fixture
def echo_plugin(monkeypatch):
    """``echo``, a reader that a plugin adds through the ``isorag_pyg.readers`` entry-point group."""
    from isorag_pyg import plugins

    point = SimpleNamespace(name="echo", load=lambda: EchoReader)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [point] if group == "isorag_pyg.readers" else [])
    monkeypatch.setattr(READERS, "_entries", dict(READERS._entries))
    monkeypatch.setattr(READERS, "_plugins_loaded", False)


def test_a_plugin_reader_is_a_kind_its_config_keys_the_arguments(echo_plugin, tmp_path):
    cfg = OmegaConf.create({"kind": "echo", "greeting": "hello", "max_tokens": 4, "top_k": 5,
                            "template": {"system": None, "user": "{passages}\nQ: {question}\nA:", "passage": "{text}"}})
    spec = reader_spec(cfg, tmp_path)
    assert (spec.kind, dict(spec.options), spec.template.user) == ("echo", {"greeting": "hello", "max_tokens": 4}, "{passages}\nQ: {question}\nA:")
    with spec.make() as reader:
        assert isinstance(reader.generator, EchoReader) and reader.generate(["q"]) == [{"answer": "hello", "prompt_tokens": None}]
    with pytest.raises(ValueError, match="unknown reader kind 'gpt'; choose from gguf, openai, transformers, none, echo$"):
        ReaderSpec(kind="gpt")
    assert "echo" not in KINDS
