"""One source of defaults: the knob dataclasses (isorag_pyg/knobs.py) and the classes' signatures;
the hydra configs, the docs' knob table and the ``isorag`` help are checked against them here."""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from isorag_pyg import defaults
from isorag_pyg.cli.parser import build_parser
from isorag_pyg.graph.auto import ENTITY_GRAPH_KNOBS, graph_knobs
from isorag_pyg.index.registry import resolve_knobs
from isorag_pyg.jobs.config import plain
from isorag_pyg.knobs import BM25Knobs, DenseKnobs, HippoRAGKnobs, ISOKnobs, PhiSpec, PPRKnobs
from isorag_pyg.retrieval import BM25Retriever, DenseRetriever, GlobalPPRRetriever, HippoRAGRetriever, ISORetriever
from isorag_pyg.server.settings import ServerSettings
from isorag_pyg.training import (
    DEFAULT_TRAINER,
    FThetaConfig,
    GraphTripletDataModule,
    HyperbolicEmbeddingModule,
)
from isorag_pyg.transforms import IsoperimetricFilter
from isorag_pyg.utils.ppr import personalized_pagerank

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def signature_defaults(function) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items() if p.default is not inspect.Parameter.empty}


def yaml(path: str, drop: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in OmegaConf.to_container(OmegaConf.load(CONF / path)).items() if k not in drop}


@pytest.mark.parametrize("path,knobs", [("retriever/iso.yaml", ISOKnobs), ("retriever/ppr.yaml", PPRKnobs),
                                        ("retriever/hipporag.yaml", HippoRAGKnobs)])
def test_retriever_configs_leave_every_knob_to_the_index(path, knobs):
    """iso.yaml / ppr.yaml name every knob and set none: each comes from what the index stores,
    else the dataclass default (tests/test_evaluate.py checks the retrievers evaluate.py makes)."""
    config = yaml(path, drop=("name", "kind", "device"))
    assert set(config) == {f.name for f in dataclasses.fields(knobs)} - {"query_chunk"}, path  # query_chunk: runtime-only
    assert all(value is None for value in config.values()), path


def test_entity_graph_config_sets_the_builder_and_leaves_the_retriever():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        chosen = compose("eval", overrides=["graph=entity_graph", "dataset=musique"])
    assert list(chosen.graph.builders) == ["entity_graph"] and chosen.graph.builders.entity_graph.idf_power == 2.0
    assert chosen.retriever.name == "iso" and chosen.retriever.hops is None  # the index's stored knobs (ENTITY_GRAPH_KNOBS)
    assert graph_knobs(plain(chosen.graph.builders)) == ENTITY_GRAPH_KNOBS  # what such an index stores


def test_benchmarks_run_the_library_defaults_where_the_index_stores_no_knobs():
    """benchmarks/common.py's retriever configs carry only the knobs they set, so on a graph whose
    index stores none (title mentions, the noise levels) a benchmark runs the dataclass defaults."""
    from benchmarks.common import retriever_config

    for name, knobs in (("iso", ISOKnobs), ("ppr", PPRKnobs)):
        config = retriever_config(name)
        assert set(config) == {"name", "kind", "device"}
        resolved, phi = resolve_knobs(config["kind"], {}, {k: v for k, v in config.items() if k not in ("name", "kind", "device")})
        assert resolved == knobs() and phi == {}


@pytest.mark.parametrize("cls,knobs", [(ISORetriever, ISOKnobs), (GlobalPPRRetriever, PPRKnobs), (DenseRetriever, DenseKnobs),
                                       (BM25Retriever, BM25Knobs), (HippoRAGRetriever, HippoRAGKnobs)])
def test_retrievers_take_the_knob_dataclasses(cls, knobs):
    assert signature_defaults(cls.__init__)["knobs"] == knobs()


@pytest.mark.parametrize("path,cls", [("model/poincare.yaml", HyperbolicEmbeddingModule), ("data/triplets.yaml", GraphTripletDataModule)])
def test_f_theta_configs_equal_the_library_defaults(path, cls):
    config = yaml(path)
    library = signature_defaults(cls.__init__)
    assert config == {k: library[k] for k in config}, path
    assert set(library) - set(config) <= {"curvature", "seed"}


def test_phi_trainer_transform_and_ppr_defaults():
    assert PhiSpec(**yaml("phi/default.yaml")) == PhiSpec()
    assert yaml("trainer/default.yaml", drop=("_target_",)) == DEFAULT_TRAINER
    transform = signature_defaults(IsoperimetricFilter.__init__)
    assert {k: transform[k] for k in ("p", "eps", "shell_floor", "curvature")} == dataclasses.asdict(PhiSpec())
    assert transform["beta"] == ISOKnobs.beta
    ppr = signature_defaults(personalized_pagerank)
    assert {k: ppr[k] for k in ("alpha", "tol", "max_iter")} == {"alpha": PPRKnobs.alpha, "tol": PPRKnobs.tol, "max_iter": PPRKnobs.max_iter}


def test_docs_knob_table_equals_the_dataclasses():
    section = (ROOT / "docs" / "configuration.md").read_text().split("## Retriever knobs\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|", section, re.MULTILINE)
    table = {name: (iso.strip(), ppr.strip()) for name, iso, ppr in rows}
    iso, ppr = dataclasses.asdict(ISOKnobs()), dataclasses.asdict(PPRKnobs())
    assert set(table) == set(iso) | set(ppr)
    for name, (iso_cell, ppr_cell) in table.items():
        assert iso_cell == (str(iso[name]) if name in iso else "—"), name
        assert ppr_cell == (str(ppr[name]) if name in ppr else "—"), name


def test_cli_defaults_and_help_come_from_the_library():
    commands = build_parser()._subparsers._group_actions[0].choices
    expected = {
        "index": {"p": PhiSpec.p, "shell_floor": PhiSpec.shell_floor, "epochs": DEFAULT_TRAINER["max_epochs"], "seed": FThetaConfig.seed,
                  "max_tokens": defaults.MAX_TOKENS, "ray_workers": defaults.RAY_WORKERS, "ray_cpus": defaults.RAY_CPUS_PER_WORKER,
                  "ray_gpus": defaults.RAY_GPUS_PER_WORKER, "lock_timeout": defaults.LOCK_TIMEOUT_S},
        "add": {"epochs": DEFAULT_TRAINER["max_epochs"], "seed": FThetaConfig.seed},
        "query": {"k": defaults.K},
        "ask": {"k": defaults.K, "llm_timeout": defaults.READER_TIMEOUT_S},
        "tune": {"folds": defaults.TUNE_FOLDS, "k": defaults.K},
        "serve": {"port": defaults.PORT, "llm_timeout": defaults.READER_TIMEOUT_S},
    }
    for command, values in expected.items():
        actions = {action.dest: action for action in commands[command]._actions}
        for dest, value in values.items():
            assert actions[dest].default == value, (command, dest)
            assert f"(default: {value:g})" in actions[dest].help, (command, dest)
    add_max_tokens = next(action for action in commands["add"]._actions if action.dest == "max_tokens")
    assert add_max_tokens.default is None and f"(default: the index's own, else {defaults.MAX_TOKENS})" in add_max_tokens.help
    serve = {action.dest: action for action in commands["serve"]._actions}  # unset unless given, so --no-batching can refuse them
    assert serve["max_batch"].default is None and f"(default: {ServerSettings().max_batch})" in serve["max_batch"].help
    assert serve["batch_window_ms"].default is None and f"(default: {ServerSettings().batch_window_ms:g})" in serve["batch_window_ms"].help
    for dest, name in (("max_questions", "max_questions"), ("max_k", "max_k"), ("max_question_chars", "max_question_chars"),
                       ("max_body_bytes", "max_body_bytes"), ("max_pending", "max_pending"), ("query_cache", "query_cache"),
                       ("read_timeout", "read_timeout_s"), ("max_connections", "max_connections"),
                       ("max_connections_per_client", "max_connections_per_client")):
        value = getattr(ServerSettings(), name)
        assert serve[dest].default == value and f"(default: {value if isinstance(value, int) else format(value, 'g')})" in serve[dest].help, dest


def test_every_k_default_is_the_one_in_defaults():
    """``k`` (passages per question) has one default: the library's signatures, the PyG stores and
    the server's request body read defaults.K, and the tuning/retriever defaults theirs."""
    from isorag_pyg.experiments.tuning import tune
    from isorag_pyg.index import ISORAGIndex
    from isorag_pyg.llm import ISORAGFeatureStore, rag_components
    from isorag_pyg.scale import RayEncoder
    from isorag_pyg.server.answers import AnswerBody
    from isorag_pyg.server.openai_api import ChatBody
    from isorag_pyg.server.schema import RetrieveBody

    for function in (ISORAGIndex.retrieve, ISORAGIndex.explain, ISORAGIndex.answer, ISORAGIndex.answer_stream, tune, rag_components,
                     ISORAGFeatureStore.__init__):
        assert signature_defaults(function)["k"] == defaults.K, function
    assert RetrieveBody.model_fields["k"].default == AnswerBody.model_fields["k"].default == ChatBody.model_fields["k"].default == defaults.K
    assert AnswerBody.model_fields["retriever"].default == signature_defaults(ISORAGIndex.answer)["retriever"] == defaults.RETRIEVER
    assert RetrieveBody.model_fields["retriever"].default == signature_defaults(ISORAGIndex.retrieve)["retriever"] == defaults.RETRIEVER
    assert {k: signature_defaults(tune)[k] for k in ("folds", "repeats")} == {"folds": defaults.TUNE_FOLDS, "repeats": defaults.TUNE_REPEATS}
    assert signature_defaults(tune)["grid"] is defaults.TUNE_GRID
    ray = signature_defaults(RayEncoder.__init__)
    assert (ray["workers"], ray["cpus_per_worker"], ray["gpus_per_worker"]) == (defaults.RAY_WORKERS, defaults.RAY_CPUS_PER_WORKER,
                                                                                defaults.RAY_GPUS_PER_WORKER)


def test_cli_retriever_names_are_the_built_in_registry():
    from isorag_pyg.cli.parser import RETRIEVER_NAMES
    from isorag_pyg.index import RETRIEVERS

    assert set(RETRIEVER_NAMES) == set(RETRIEVERS)
