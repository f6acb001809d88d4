"""Encoding on Ray Data: a local cluster of two worker nodes, started by the test, gives the
embeddings of one process, in corpus order, and the index built with it equals the plain one."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.scale import EncodeStep, RayEncoder, ray_map


@pytest.fixture(scope="module")
def cluster():
    """A head without CPUs and two one-CPU worker nodes: every actor runs on a worker node."""
    from ray import cloudpickle
    from ray.cluster_utils import Cluster

    local = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        local.add_node(num_cpus=1)
    local.wait_for_nodes()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module: send Reverse by value
    yield local.address
    local.shutdown()


class Reverse:
    """A map step that is not encoding: each text reversed, as bytes."""

    def load(self):
        return lambda texts: np.array([t[::-1] for t in texts])


@pytest.mark.slow
@pytest.mark.extra("ray")
def test_ray_encoding_equals_one_process_in_corpus_order(cluster, tmp_path):
    corpus = generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=8).corpus
    texts = [p.content for p in corpus]
    one = SentenceEncoder(cache_dir=None, show_progress=False, device="cpu").encode(texts)
    encoder = RayEncoder(address=cluster, workers=2, batch_size=16, cache_dir=tmp_path, device="cpu")
    assert encoder.fingerprint == SentenceEncoder(cache_dir=None).fingerprint
    emb = encoder.encode(texts)
    assert emb.shape == one.shape and emb.dtype == torch.float32
    assert torch.allclose(emb, one, atol=1e-5)  # batches padded to other lengths: float noise only
    assert (emb @ one.T).argmax(dim=1).tolist() == list(range(len(texts)))  # every row in its own place
    assert torch.equal(encoder.encode(texts), emb)  # the second call reads the cache



@pytest.mark.slow
@pytest.mark.extra("ray")
def test_isorag_index_with_ray_writes_the_same_index(cluster, tmp_path):
    corpus = generate_synthetic_dataset(num_entities=60, num_hubs=2, hub_size=15, num_questions=8).corpus
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in corpus))
    env = {**os.environ, "ISORAG_CACHE_DIR": str(tmp_path / "cache")}  # no embedding cache hit: Ray really encodes
    done = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", "index", str(tmp_path / "corpus.jsonl"), str(tmp_path / "ray_index"),
                           "--p", "0", "--quiet", "--ray", cluster, "--ray-workers", "2"], check=False, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    built = ISORAGIndex.load(tmp_path / "ray_index")
    plain = ISORAGIndex.build(corpus, encoder=SentenceEncoder(cache_dir=None, show_progress=False, device="cpu"),
                              f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    assert built.info()["encoder"] == plain.info()["encoder"]
    assert torch.allclose(built.embeddings.float(), plain.embeddings.float(), atol=1e-5)
    assert torch.equal(built.graph.edge_index, plain.graph.edge_index)


@pytest.mark.slow
@pytest.mark.extra("ray")
def test_any_map_step_comes_back_in_order_and_bad_steps_are_clear(cluster):
    texts = [f"text {i}" for i in range(50)]
    assert ray_map(texts, Reverse(), address=cluster, workers=2, batch_size=7).tolist() == [t[::-1] for t in texts]
    with pytest.raises(Exception, match="fingerprint mismatch"):
        ray_map(texts[:4], EncodeStep("sha256:not-this-model", {"device": "cpu"}), address=cluster, workers=1)


def test_ray_map_refuses_nonsense_before_starting_ray():
    with pytest.raises(ValueError, match="at least one text"):
        ray_map([], Reverse())
    with pytest.raises(ValueError, match="must be >= 1"):
        ray_map(["a"], Reverse(), workers=0)


@pytest.mark.parametrize(("flags", "message"), [
    (["--encode-devices", "cpu", "cpu"], "choose one"),
    (["--pool-tokens"], "drop --encoder-backend and --pool-tokens"),  # Ray encodes with torch: the flag would be ignored
    (["--encoder-backend", "onnx"], "drop --encoder-backend and --pool-tokens"),
])
def test_ray_with_flags_it_cannot_honour_is_refused(tmp_path, flags, message):
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"title": "A", "text": "a passage"}) + "\n")
    done = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", "index", str(tmp_path / "corpus.jsonl"), str(tmp_path / "out"),
                           "--ray", *flags], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and message in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()
