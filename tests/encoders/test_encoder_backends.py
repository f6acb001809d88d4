"""Encoder backends (onnx, onnx-int8, openvino, openvino-bf16) exported from the packaged MiniLM, the query LRU
cache, and what an index records and enforces about them."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from isorag_pyg.cli import main
from isorag_pyg.cli.parser import ENCODER_BACKENDS
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.encoders.backends import BACKENDS, MissingBackendError, check_backend, model_features, token_batches, tokenize
from isorag_pyg.encoders.query_cache import LRUQueryEncoder
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.knobs import PhiSpec

TEXTS = ["Paris is the capital of France.", "Dijon is a city in France known for mustard. " * 6, "Mustard?"]
PASSAGES = [{"title": "Paris", "text": "Paris is the capital of France."},
            {"title": "Dijon", "text": "Dijon is a city in France known for mustard."},
            {"title": "Lyon", "text": "Lyon lies where the Rhône meets the Saône."}]


@pytest.fixture(scope="module")
def torch_embeddings() -> torch.Tensor:
    return SentenceEncoder(cache_dir=None, show_progress=False).encode(TEXTS)


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
@pytest.mark.extra("onnx", "openvino")
def test_fp32_backends_give_torchs_embeddings_and_share_its_fingerprint(backend, torch_embeddings):
    encoder = SentenceEncoder(cache_dir=None, show_progress=False, backend=backend, batch_size=2)
    emb = encoder.encode(TEXTS)
    assert emb.shape == torch_embeddings.shape and emb.dtype == torch.float32
    assert (emb * torch_embeddings).sum(1).min() > 0.99999
    assert encoder.fingerprint == SentenceEncoder(cache_dir=None).fingerprint


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("openvino")
def test_bf16_backend_is_torchs_embeddings_to_bf16_precision_and_shares_its_fingerprint(torch_embeddings):
    encoder = SentenceEncoder(cache_dir=None, show_progress=False, backend="openvino-bf16", batch_size=2)
    emb = encoder.encode(TEXTS)
    assert emb.shape == torch_embeddings.shape and emb.dtype == torch.float32
    assert torch.allclose(emb.norm(dim=1), torch.ones(len(TEXTS)), atol=1e-5)
    assert (emb * torch_embeddings).sum(1).min() > 0.9999
    assert encoder.fingerprint == SentenceEncoder(cache_dir=None).fingerprint
    # a batch's texts do not change each other's vectors beyond bf16's rounding
    alone = torch.cat([encoder.encode([text]) for text in TEXTS])
    assert (alone * emb).sum(1).min() > 0.9999
    import openvino

    if "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):  # bf16 really runs: not fp32's vectors
        fp32 = SentenceEncoder(cache_dir=None, show_progress=False, backend="openvino", batch_size=2).encode(TEXTS)
        assert not torch.allclose(emb, fp32, atol=1e-5)


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("openvino")
def test_backends_sharing_a_fingerprint_keep_their_cached_vectors_apart(tmp_path, torch_embeddings):
    bf16 = SentenceEncoder(cache_dir=tmp_path, show_progress=False, backend="openvino-bf16").encode(TEXTS)
    cached = SentenceEncoder(cache_dir=tmp_path, show_progress=False)
    assert torch.equal(cached.encode(TEXTS), torch_embeddings) and not torch.equal(bf16, torch_embeddings)
    assert len(list(tmp_path.glob("emb-*.pt"))) == 2  # one file per backend
    assert torch.equal(SentenceEncoder(cache_dir=tmp_path, show_progress=False, backend="openvino-bf16").encode(TEXTS), bf16)


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("openvino")
def test_bf16_backend_runs_in_fp32_with_a_warning_on_a_cpu_without_bf16(monkeypatch, caplog):
    import openvino

    class CoreWithoutBF16(openvino.Core):
        def get_property(self, device, name):
            return ["FP32", "INT8"] if name == "OPTIMIZATION_CAPABILITIES" else super().get_property(device, name)

    fp32 = SentenceEncoder(cache_dir=None, show_progress=False, backend="openvino").encode(TEXTS)
    monkeypatch.setattr(openvino, "Core", CoreWithoutBF16)
    with caplog.at_level("WARNING", logger="isorag_pyg.encoders.backends"):
        emb = SentenceEncoder(cache_dir=None, show_progress=False, backend="openvino-bf16").encode(TEXTS)
    assert "no native bf16" in caplog.text
    assert torch.allclose(emb, fp32, atol=1e-6)


@pytest.mark.encoder
def test_token_batches_cover_every_text_once_longest_first_within_the_token_budget():
    model = SentenceEncoder(cache_dir=None, show_progress=False)._load()
    texts = [f"word {'x ' * (i * 7 % 40)}" for i in range(23)] + ["long " * 400]  # the last is truncated
    batches = list(token_batches(model_features(model, texts), max_texts=4, max_tokens=64))
    rows = [i for batch_rows, _ in batches for i in batch_rows]
    assert sorted(rows) == list(range(len(texts)))
    widths = [batch["input_ids"].shape[1] for _, batch in batches]
    assert widths == sorted(widths, reverse=True) and widths[0] == model.max_seq_length
    for batch_rows, batch in batches:
        assert len(batch_rows) <= 4 and (len(batch_rows) == 1 or len(batch_rows) * batch["input_ids"].shape[1] <= 64)
        for j, i in enumerate(batch_rows):  # each row is the text's own tokens, then padding
            alone = tokenize(model, [texts[i]])
            n = alone["input_ids"].shape[1]
            for name, values in alone.items():
                assert (batch[name][j, :n] == values[0]).all() and not batch[name][j, n:].any()


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("onnx")
def test_int8_is_close_to_torch_but_has_a_fingerprint_of_its_own(torch_embeddings):
    encoder = SentenceEncoder(cache_dir=None, show_progress=False, backend="onnx-int8")
    emb = encoder.encode(TEXTS)
    cosine = (emb * torch_embeddings).sum(1)
    assert cosine.min() > 0.97 and cosine.min() < 0.99999  # quantised: close, not equal
    assert torch.allclose(emb.norm(dim=1), torch.ones(len(TEXTS)), atol=1e-5)
    assert encoder.fingerprint.startswith(SentenceEncoder(cache_dir=None).fingerprint) and encoder.fingerprint.endswith("int8-dynamic-per-text")
    # a text's int8 embedding does not depend on the texts encoded with it (dynamic quantisation
    # scales a whole batch at once, so int8 encodes one text a run)
    alone = torch.cat([encoder.encode([text]) for text in TEXTS])
    assert torch.equal(alone, emb) and torch.equal(encoder.encode(TEXTS[::-1]), emb.flip(0))
    # one session per thread, batches spread over them: the same vectors in the same order
    for threads in (1, 3):
        assert torch.equal(SentenceEncoder(cache_dir=None, show_progress=False, backend="onnx-int8", threads=threads).encode(TEXTS * 3), emb.repeat(3, 1))


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("onnx")
def test_cli_index_records_the_backend_and_an_int8_index_refuses_fp32_questions(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    assert main(["index", str(corpus), str(tmp_path / "index"), "--encoder-backend", "onnx-int8", "--quiet"]) == 0
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["encoder"]["backend"] == "onnx-int8" and manifest["encoder"]["fingerprint"].endswith("int8-dynamic-per-text")
    index = ISORAGIndex.load(tmp_path / "index")
    assert index.encoder.backend == "onnx-int8"
    assert index.retrieve(["Which city is known for mustard?"], k=1, retriever="dense")[0][0].title == "Dijon"
    with pytest.raises(ValueError, match="onnx-int8 backend; fingerprint mismatch"):
        index.encoder = SentenceEncoder(cache_dir=None, backend="onnx")
    capsys.readouterr()
    assert main(["serve", str(tmp_path / "index"), "--port", "0", "--encoder-backend", "torch"]) == 1
    assert "fingerprint mismatch" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.extra("onnx", "openvino")
def test_a_torch_index_may_be_queried_on_any_backend_sharing_its_fingerprint():
    index = ISORAGIndex.build(PASSAGES, encoder=SentenceEncoder(show_progress=False), f_theta=None, phi=PhiSpec(p=0), progress=False)
    assert index.encoder_spec["backend"] == "torch"
    for backend in ("onnx", "openvino", "openvino-bf16"):  # accepted: same fingerprint (nothing is loaded yet)
        index.encoder = SentenceEncoder(cache_dir=None, backend=backend)
    with pytest.raises(ValueError, match="fingerprint mismatch"):
        index.encoder = SentenceEncoder(cache_dir=None, backend="onnx-int8")


def test_unknown_and_missing_backends_are_one_line_naming_the_extra(monkeypatch):
    with pytest.raises(ValueError, match="unknown encoder backend 'tensorrt'; choose from torch, onnx, onnx-int8, openvino, openvino-bf16$"):
        SentenceEncoder(backend="tensorrt")
    assert ENCODER_BACKENDS == BACKENDS  # the command line offers every backend, and no other
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("onnxruntime", "openvino") else real(name, *a))
    with pytest.raises(MissingBackendError, match=r"^the onnx-int8 encoder backend needs onnxruntime: pip install 'isorag_pyg\[onnx\]'$"):
        check_backend("onnx-int8")
    for backend in ("openvino", "openvino-bf16"):
        with pytest.raises(MissingBackendError, match=rf"^the {backend} encoder backend needs openvino: pip install 'isorag_pyg\[openvino\]'$"):
            SentenceEncoder(backend=backend)


class CountingEncoder:
    name, fingerprint, backend = "counting", "fp", "torch"

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return torch.stack([torch.full((4,), float(len(t))) for t in texts])


def test_the_query_cache_encodes_each_missing_question_once_and_forgets_the_least_recent():
    inner = CountingEncoder()
    cached = LRUQueryEncoder(inner, size=2)
    first = cached.encode(["aa", "b", "aa"])
    assert inner.calls == [["aa", "b"]] and torch.equal(first, inner.encode(["aa", "b", "aa"]))
    inner.calls.clear()
    cached.encode(["b", "ccc"])  # "aa" is now the least recent and is dropped
    cached.encode(["aa", "b"])
    assert inner.calls == [["ccc"], ["aa"]] and (cached.hits, cached.misses) == (3, 4)
    assert (cached.name, cached.fingerprint, cached.backend) == ("counting", "fp", "torch")
    # each kept embedding owns its storage: a view of its batch's tensor would keep the whole
    # batch alive for as long as any of its rows stays cached
    for row in cached._cache.values():
        assert row.untyped_storage().nbytes() == row.numel() * row.element_size()


def test_the_servers_query_cache_size_is_checked_and_wraps_the_index_encoder():
    from isorag_pyg.server import ServerSettings, create_app

    with pytest.raises(ValueError, match="query_cache must be a non-negative integer"):
        ServerSettings(query_cache=-1)
    index = ISORAGIndex.build(PASSAGES, encoder=CountingEncoder(), f_theta=None, phi=PhiSpec(p=0), progress=False)
    index.encoder = CountingEncoder()
    create_app(index, ServerSettings(query_cache=8))
    assert isinstance(index.encoder, LRUQueryEncoder) and index.encoder.size == 8


@pytest.mark.slow
@pytest.mark.encoder
@pytest.mark.extra("onnx")
def test_a_reload_to_another_encoder_gets_that_encoder_behind_a_fresh_query_cache(tmp_path):
    from isorag_pyg.server import ServerSettings, create_app
    from isorag_pyg.server.engine import RetrievalRequest

    directory = tmp_path / "index"
    build = {"f_theta": None, "phi": PhiSpec(p=0.0), "progress": False}
    ISORAGIndex.build(PASSAGES, encoder=SentenceEncoder(cache_dir=None, show_progress=False), **build).save(directory)
    served = create_app(ISORAGIndex.load(directory), ServerSettings(query_cache=16)).state.served
    served.run([RetrievalRequest(("Where is mustard made?",), 2, "iso")])
    torch_cache = served.index.encoder
    assert isinstance(torch_cache, LRUQueryEncoder) and torch_cache.misses == 1

    same = ISORAGIndex.load(directory)  # a new version, same encoder: the loaded one (and its cache) stays
    same.save(directory)
    assert served.reload()["reloaded"] and served.index.encoder is torch_cache

    int8 = SentenceEncoder(cache_dir=None, show_progress=False, backend="onnx-int8")
    ISORAGIndex.build(PASSAGES, encoder=int8, **build).save(directory)  # rebuilt with another encoder
    assert served.reload()["reloaded"]
    cache = served.index.encoder
    # a fresh cache of the server's size: only the new version's warm-up question is in it
    assert isinstance(cache, LRUQueryEncoder) and cache is not torch_cache and cache.size == 16 and (cache.hits, cache.misses) == (0, 1)
    assert (cache.backend, cache.fingerprint) == ("onnx-int8", int8.fingerprint)
    [hits] = served.run([RetrievalRequest(("Where is mustard made?",), 2, "iso")])
    assert hits.hits[0][0].id == served.index.passages[1].id and cache.misses == 2  # Dijon, the question embedded by int8
