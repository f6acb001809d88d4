"""An opened index answers questions without importing PyG, Lightning, geoopt, FAISS or BM25: its
graph stays the tensors read from its files (PyG's ``Data`` built on first use, equal to a
build's), f_θ its weights, and retrieval skips PyG's clean-up of a graph that is clean already."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from entity_corpus import entity_index
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from isorag_pyg import FThetaConfig, ISORAGIndex, PhiSpec
from isorag_pyg.index import IndexFormatError
from isorag_pyg.retrieval import RetrievalGraph
from isorag_pyg.store.contents import StoredGraph
from isorag_pyg.store.storage import StoredFTheta
from isorag_pyg.utils.csr import is_clean_undirected

REPO = Path(__file__).resolve().parents[2]
#: What answering a question over an opened index must not import (each costs from 0.1 s to seconds).
HEAVY = ("torch_geometric", "lightning", "geoopt", "hydra", "faiss", "bm25s", "matplotlib", "transformers", "sentence_transformers")


@pytest.fixture(scope="module")
def entity_dir(tmp_path_factory) -> Path:
    return entity_index().save(tmp_path_factory.mktemp("opened") / "index")


@pytest.fixture(scope="module")
def f_theta_dir(tmp_path_factory) -> Path:
    config = FThetaConfig(trainer={"max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False})
    from index_helpers import passages

    index = ISORAGIndex.build(passages(12), f_theta=config, phi=PhiSpec(p=1.0), progress=False)
    return index.save(tmp_path_factory.mktemp("opened") / "f_theta")


def _imports_while_retrieving(directory: Path) -> dict:
    """In a fresh process: open the index, retrieve with every built-in graph retriever for
    questions given as passage embeddings (no encoder), and list the heavy modules imported."""
    code = f"""
import json, sys
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.retrieval import Queries
index = ISORAGIndex.load({str(directory)!r})
queries = Queries(["a", "b"], index.embeddings[:2].clone())
ranked = {{name: index.retriever(name).retrieve(queries, 3).indices.tolist() for name in ("iso", "iso_uniform", "ppr", "dense")}}
info = index.info()
print(json.dumps({{"ranked": ranked, "heavy": sorted(set({HEAVY!r}) & set(sys.modules))}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("which", ["entity_dir", "f_theta_dir"])
def test_retrieving_from_an_opened_index_imports_nothing_heavy_and_ranks_as_the_full_load(which, request):
    directory = request.getfixturevalue(which)
    seen = _imports_while_retrieving(directory)
    assert seen["heavy"] == []
    index = ISORAGIndex.load(directory)
    index.graph  # noqa: B018 - the PyG Data built, as every load did before
    from isorag_pyg.retrieval import Queries

    queries = Queries(["a", "b"], index.embeddings[:2].clone())
    assert seen["ranked"] == {name: index.retriever(name).retrieve(queries, 3).indices.tolist() for name in seen["ranked"]}


def test_the_data_an_opened_index_builds_equals_the_built_graph(entity_dir):
    built, opened = entity_index(), ISORAGIndex.load(entity_dir)
    assert isinstance(opened.contents.graph, StoredGraph)
    assert opened.entity_names == built.graph.entity_names and opened.unique_mentions == built.graph.unique_mentions
    data, original = opened.graph, built.graph
    assert not isinstance(opened.contents.graph, StoredGraph)  # built once, then kept
    for key in ("x", "edge_index", "edge_weight", "edge_source", "node_type"):
        assert torch.equal(data[key], original[key]), key
    for key in ("num_nodes", "num_passages", "entity_names", "unique_mentions", "builders", "leak"):
        assert getattr(data, key) == getattr(original, key), key


def test_f_theta_is_opened_on_first_use_and_saved_as_read(f_theta_dir, tmp_path):
    opened = ISORAGIndex.load(f_theta_dir)
    assert isinstance(opened._f_theta, StoredFTheta)
    copy = opened.save(tmp_path / "copy")  # f_θ's weights written back as read, without building the module
    assert isinstance(opened._f_theta, StoredFTheta)
    assert (copy / "f_theta.safetensors").read_bytes() == (f_theta_dir / "f_theta.safetensors").read_bytes()
    z = opened.f_theta.embed_all(opened.embeddings)
    assert torch.allclose(z, opened.z, atol=1e-6)


def test_f_theta_weights_that_do_not_fit_the_architecture_are_an_index_format_error(f_theta_dir):
    opened = ISORAGIndex.load(f_theta_dir)
    stored = opened._f_theta
    opened._f_theta = StoredFTheta(stored.path, {k: v[:1] if v.dim() else v for k, v in stored.weights.items()}, stored.architecture, stored.curvature)
    with pytest.raises(IndexFormatError, match="do not fit its architecture"):
        opened.f_theta  # noqa: B018


def _pyg_clean(edge_index, edge_weight, n):
    """What RetrievalGraph did with every graph before: PyG's symmetrise, drop self-loops, coalesce."""
    ei, w = to_undirected(edge_index, edge_weight, num_nodes=n, reduce="mean")
    return coalesce(*remove_self_loops(ei, w), num_nodes=n, reduce="mean")


def test_a_clean_graph_is_taken_as_it_is_and_others_are_cleaned_by_pyg():
    n, generator = 30, torch.Generator().manual_seed(0)
    raw = torch.randint(0, n, (2, 120), generator=generator)
    weight = torch.rand(120, generator=generator)
    clean, clean_weight = _pyg_clean(raw, weight, n)
    assert is_clean_undirected(clean, n, clean_weight) and is_clean_undirected(clean, n)
    assert not is_clean_undirected(raw, n, weight)  # self-loops, repeats, one direction only, unsorted
    asymmetric = clean_weight.clone()
    asymmetric[0] += 1
    assert not is_clean_undirected(clean, n, asymmetric) and not is_clean_undirected(clean.flip(1), n)
    x = torch.nn.functional.normalize(torch.randn(n, 4, generator=generator), dim=-1)
    for edges, weights in ((raw, weight), (clean, clean_weight), (clean, asymmetric)):
        fast, reference = RetrievalGraph(edges, x, edge_weight=weights), _pyg_clean(edges, weights, n)
        assert torch.equal(fast.edge_index, reference[0]) and torch.equal(fast.edge_weight, reference[1])
    unweighted = RetrievalGraph(raw, x)
    assert torch.equal(unweighted.edge_index, _pyg_clean(raw, None, n)[0]) and unweighted.edge_weight is None
