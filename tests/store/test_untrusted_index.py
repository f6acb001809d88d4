"""A saved index is checked, not trusted: a manifest or tensors a writer got wrong are an
IndexFormatError, and nothing in an index can make load or retrieve run code."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from index_helpers import _with, passages, rewrite
from safetensors.torch import load_file

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.encoders.sentence import model_fingerprint
from isorag_pyg.index import IndexFormatError


def _files_entry_int(m: dict) -> None:
    m["files"]["passages.jsonl"] = 7

def _outside(m: dict) -> None:
    m["files"]["../outside.bin"] = m["files"].pop("passages.jsonl")

def _unlisted(m: dict) -> None:
    del m["files"]["tensors.safetensors"]

def _counts_string(m: dict) -> None:
    m["counts"]["passages"] = "20"

@pytest.mark.parametrize("damage, match", [
    (lambda t: (t, _files_entry_int), r"manifest.json: invalid manifest: files.passages.jsonl"),
    (lambda t: (t, _outside), r"manifest.json: invalid manifest: file '../outside.bin' is not a plain file name"),
    (lambda t: (t, _unlisted), r"manifest.json: invalid manifest: tensors.safetensors is read but not listed"),
    (lambda t: (t, _counts_string), r"manifest.json: invalid manifest: counts.passages"),
    (lambda t: (_with(t, "log_phi", torch.where(torch.arange(t["log_phi"].numel()) == 3, math.nan, t["log_phi"])), None), "'log_phi' holds NaN"),
    (lambda t: (_with(t, "embeddings", t["embeddings"] * math.inf), None), "'embeddings' holds NaN or infinite"),
    (lambda t: (_with(t, "edge_source", t["edge_source"][:-1]), None), r"'edge_source' has shape"),
    (lambda t: (_with(t, "edge_source", t["edge_source"] * 0 + 64), None), r"'edge_source' has values outside"),
    (lambda t: (_with(t, "edge_weight", t["edge_weight"].double()), None), r"'edge_weight' is torch.float64"),
    (lambda t: (_with(t, "passage_offsets", t["passage_offsets"].flip(0)), None), "'passage_offsets' must rise strictly"),
    (lambda t: (_with(t, "knn_edges", torch.tensor([[0], [99]])), None), r"'knn_edges' has values outside"),
])
def test_a_manifest_or_tensors_a_writer_got_wrong_are_an_index_format_error(copy, damage, match):
    tensors, edit = damage(load_file(copy / "tensors.safetensors"))
    rewrite(copy, tensors, edit)
    with pytest.raises(IndexFormatError, match=match):
        ISORAGIndex.load(copy)

def test_ball_coordinates_outside_the_ball_are_refused(tmp_path):
    index = ISORAGIndex.build(passages(12), phi=PhiSpec(p=1.0), progress=False, f_theta=_quick_f_theta())
    directory = index.save(tmp_path / "index")
    tensors = load_file(directory / "tensors.safetensors")
    rewrite(directory, _with(tensors, "z", tensors["z"] * 100))
    with pytest.raises(IndexFormatError, match="outside the Poincaré ball"):
        ISORAGIndex.load(directory)

def _quick_f_theta():
    from isorag_pyg import FThetaConfig
    from isorag_pyg.training.config import DEFAULT_TRAINER

    return FThetaConfig(trainer={**DEFAULT_TRAINER, "max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False})

def test_an_index_cannot_make_load_or_retrieve_run_code(copy, tmp_path):
    """A manifest naming an encoder folder with custom module code: refused, the code never runs."""
    import re

    import sentence_transformers
    from packaging.requirements import Requirement

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    pinned = Requirement(re.search(r'"(sentence-transformers[^"]*)"', pyproject).group(1))
    assert not pinned.specifier.contains("5.9") and pinned.specifier.contains(sentence_transformers.__version__)  # 6.0 refuses custom code
    model = tmp_path / "evil_model"
    model.mkdir()
    marker = tmp_path / "pwned"
    (model / "evil_module.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass Evil:\n    pass\n")
    (model / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "evil_module.Evil"}]))
    (model / "config_sentence_transformers.json").write_text(json.dumps({"__version__": {"sentence_transformers": "6.0.0"}}))

    def point_at_evil(m: dict) -> None:
        m["encoder"] = {**m["encoder"], "name": str(model), "fingerprint": model_fingerprint(str(model))}

    rewrite(copy, edit=point_at_evil)
    index = ISORAGIndex.load(copy)
    with pytest.raises(Exception, match="trust_remote_code|not part of Sentence Transformers"):
        index.retrieve(["Which town is known for craft number 5?"], k=2)
    sys.path.insert(0, str(model))
    try:
        with pytest.raises(Exception, match="trust_remote_code|not part of Sentence Transformers"):
            ISORAGIndex.load(copy).retrieve(["again, with the module importable"], k=2)
    finally:
        sys.path.remove(str(model))
    assert not marker.exists()
