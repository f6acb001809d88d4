"""The evaluation cache's key: the same settings find the same index; anything that shapes the
index, the graph builders' code version included, finds another."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.experiments import index_cache as cache
from isorag_pyg.experiments.index_cache import index_cache_path
from isorag_pyg.knobs import PhiSpec

DATASET = generate_synthetic_dataset(num_entities=30, num_hubs=1, hub_size=5, num_questions=3)
ENCODER = SimpleNamespace(fingerprint="minilm+torch")


def key(**changes) -> Path:
    settings = {"dataset": DATASET, "train": None, "encoder": ENCODER, "graph": {"title_mention": {}}, "phi": PhiSpec(p=0.0), "f_theta": None}
    return index_cache_path(Path("/cache"), **{**settings, **changes})


def test_the_same_settings_find_the_same_index_and_other_settings_another():
    assert key() == key() and key().parent == Path("/cache/indexes")
    others = [key(graph={"entity_graph": {}}), key(phi=PhiSpec(p=1.0)), key(encoder=SimpleNamespace(fingerprint="minilm+onnx-int8")),
              key(dataset=generate_synthetic_dataset(seed=1, num_entities=30, num_hubs=1, hub_size=5, num_questions=3))]
    assert len({key(), *others}) == 1 + len(others)


def test_indexes_built_by_older_graph_builders_are_not_reused(monkeypatch):
    before = key()
    monkeypatch.setattr(cache, "BUILDERS_VERSION", cache.BUILDERS_VERSION + 1)
    assert key() != before


def test_indexes_stored_with_other_knobs_are_not_reused(monkeypatch):
    """A cached index keeps the knobs it was built with: when the knobs its graph stores change
    (an entity graph's, title mentions'), its entry changes; graphs that store no knobs keep theirs."""
    assert cache.graph_knobs({"title_mention": {}}) and not cache.graph_knobs({"knn": {}})
    entity, titles, plain = key(graph={"entity_graph": {}}), key(), key(graph={"knn": {}})
    stored = cache.graph_knobs
    monkeypatch.setattr(cache, "graph_knobs", lambda graph: {**stored(graph), "iso": {"hops": 2, "tau": 5.0}} if stored(graph) else {})
    assert key(graph={"entity_graph": {}}) != entity and key() != titles and key(graph={"knn": {}}) == plain
