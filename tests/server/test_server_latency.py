"""The server's own latency histogram: the answered requests of ``POST /retrieve``, in fixed
buckets, read from ``GET /health``."""
from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.server import ServerSettings, create_app
from isorag_pyg.server.latency import BUCKETS_MS, LatencyHistogram, percentile_ms


class LengthEncoder:
    """A deterministic stand-in for a sentence encoder: a text's vector is its length."""

    name, fingerprint, backend = "length", "length-v1", "torch"

    def encode(self, texts):
        return torch.stack([torch.tensor([float(len(t)), 1.0, 0.5, 0.25]) for t in texts])


def test_percentiles_are_the_upper_bounds_of_the_buckets_holding_them():
    histogram = LatencyHistogram()
    for seconds in [0.0005] * 50 + [0.1] * 49 + [0.9]:
        histogram.observe(seconds)
    counts = histogram.counts()
    assert sum(counts) == 100 and counts[0] == 50 and len(counts) == len(BUCKETS_MS)
    p50, p99, p100 = (percentile_ms(counts, q) for q in (0.5, 0.99, 1.0))
    assert p50 == 1.0 and 100 <= p99 < 125 and 900 <= p100 < 1125  # within one bucket (x1.25) above the true value
    assert percentile_ms([0] * len(BUCKETS_MS), 0.99) is None
    as_json = histogram.to_dict()
    assert as_json["buckets_ms"][-1] is None and as_json["p50_ms"] == 1.0 and as_json["counts"] == counts
    histogram.observe(3600.0)  # an hour: the unbounded last bucket
    assert histogram.counts()[-1] == 1 and percentile_ms(histogram.counts(), 1.0) is None
    with pytest.raises(ValueError, match="q must lie in"):
        percentile_ms(counts, 0.0)


def test_health_counts_the_answered_retrieve_requests():
    passages = [{"title": t, "text": f"{t} is a place."} for t in ("Paris", "Dijon", "Lyon", "Metz")]
    index = ISORAGIndex.build(passages, encoder=LengthEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    index.encoder = LengthEncoder()  # the index keeps the record of its encoder, not the object
    with TestClient(create_app(index, ServerSettings(batch_window_ms=1)), base_url="http://localhost") as client:
        assert sum(client.get("/health").json()["latency"]["counts"]) == 0
        for question in ("Where is Paris?", "Where is Dijon?", "Metz?"):
            assert client.post("/retrieve", json={"questions": [question], "k": 2}).status_code == 200
        assert client.post("/retrieve", json={"questions": [], "k": 2}).status_code == 422  # refused: not counted
        latency = client.get("/health").json()["latency"]
    assert sum(latency["counts"]) == 3 and 0 < latency["p50_ms"] <= latency["p99_ms"]
