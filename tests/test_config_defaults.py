"""One set of defaults: the hydra configs say what the library does when given nothing."""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from isorag_pyg.retrieval import GlobalPPRRetriever, ISORetriever
from isorag_pyg.training import (
    DEFAULT_TRAINER,
    GraphTripletDataModule,
    HyperbolicEmbeddingModule,
)
from isorag_pyg.transforms import IsoperimetricFilter
from isorag_pyg.utils import PhiSpec

CONF = Path(__file__).resolve().parents[1] / "conf"


def defaults(cls: type) -> dict:
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items() if p.default is not inspect.Parameter.empty}


def yaml(path: str, drop: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in OmegaConf.to_container(OmegaConf.load(CONF / path)).items() if k not in drop}


@pytest.mark.parametrize("path,cls", [("retriever/iso.yaml", ISORetriever), ("retriever/ppr.yaml", GlobalPPRRetriever),
                                      ("model/poincare.yaml", HyperbolicEmbeddingModule), ("data/triplets.yaml", GraphTripletDataModule)])
def test_configs_equal_the_library_defaults(path, cls):
    config = yaml(path, drop=("name", "kind", "device"))
    library = defaults(cls)
    assert config == {k: library[k] for k in config}, path
    assert set(library) - set(config) <= {"query_chunk", "curvature", "seed", "ann"}  # runtime-only arguments (ann: the index's own)


def test_phi_and_trainer_defaults():
    assert PhiSpec(**yaml("phi/default.yaml")) == PhiSpec()
    assert yaml("trainer/default.yaml", drop=("_target_",)) == DEFAULT_TRAINER
    transform = defaults(IsoperimetricFilter)
    assert {k: transform[k] for k in ("p", "eps", "shell_floor", "curvature")} == dataclasses.asdict(PhiSpec())
