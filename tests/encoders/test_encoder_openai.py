"""encoder=openai: embeddings from an OpenAI-compatible server (a fake one with scripted failures
here; llama-cpp-python's real server in embedding mode at the end)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fake_embedding_server import FakeEmbeddings, fake_vector

from isorag_pyg.encoders.openai import EmbeddingServerError, OpenAIEncoder
from isorag_pyg.index import ISORAGIndex
from isorag_pyg.knobs import PhiSpec

REPO = Path(__file__).resolve().parents[2]
TEXTS = [f"text number {i}" for i in range(10)]


def expected(texts: list[str], dim: int = 16) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.tensor([fake_vector(t, dim) for t in texts]), dim=1)


def test_batches_in_flight_together_give_normalised_vectors_in_order(tmp_path):
    with FakeEmbeddings(latency=0.3) as server:
        encoder = OpenAIEncoder("fake-model", server.base_url, batch_size=3, concurrency=4, cache_dir=tmp_path)
        emb = encoder.encode(TEXTS)
    assert torch.allclose(emb, expected(TEXTS), atol=1e-6)
    assert sorted(server.inputs) == sorted(TEXTS[i:i + 3] for i in range(0, 10, 3))
    assert server.most_in_flight > 1
    assert encoder.dim == 16 and encoder.fingerprint == "openai:fake-model"


def test_a_failed_request_is_retried_with_backoff(tmp_path):
    with FakeEmbeddings(failures=["500", "500"]) as server:
        emb = OpenAIEncoder("m", server.base_url, batch_size=10, max_retries=2, cache_dir=None).encode(TEXTS)
    assert torch.allclose(emb, expected(TEXTS), atol=1e-6) and len(server.inputs) == 3


@pytest.mark.parametrize("failure, message", [("short", "returned 3 vectors for the 4 texts of batch 2 of 3"),
                                              ("dim", "vectors of size [17] for batch 2 of 3"),
                                              ("500", "failed batch 2 of 3 (texts 4-7)")])
def test_a_bad_answer_names_the_batch_and_a_rerun_resumes_from_the_cache(tmp_path, failure, message):
    with FakeEmbeddings(fail_on={TEXTS[5]: failure}) as server:
        encoder = OpenAIEncoder("m", server.base_url, dim=16, batch_size=4, concurrency=1, max_retries=0, cache_dir=tmp_path)
        with pytest.raises(EmbeddingServerError, match=re.escape(message)):
            encoder.encode(TEXTS)
        server.fail_on.clear()
        server.inputs.clear()
        emb = OpenAIEncoder("m", server.base_url, dim=16, batch_size=4, concurrency=1, cache_dir=tmp_path).encode(TEXTS)
    assert torch.allclose(emb, expected(TEXTS), atol=1e-6)
    assert server.inputs[0] == TEXTS[4:8] and TEXTS[:4] not in server.inputs  # the batch before came from the cache


def test_a_server_that_is_down_or_too_slow_is_a_clear_error(tmp_path):
    with FakeEmbeddings() as server:
        url = server.base_url
    with pytest.raises(EmbeddingServerError, match=f"at {url} failed batch 1 of 1.*APIConnectionError"):
        OpenAIEncoder("m", url, max_retries=0, cache_dir=None).encode(TEXTS)
    with FakeEmbeddings(failures=["timeout"], delay=3) as server, \
            pytest.raises(EmbeddingServerError, match="failed batch 1 of 1.*APITimeoutError"):
        OpenAIEncoder("m", server.base_url, timeout=0.5, max_retries=0, cache_dir=None).encode(TEXTS)


def test_the_url_comes_from_the_environment_or_is_asked_for(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        OpenAIEncoder("m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert OpenAIEncoder("m").base_url == "http://127.0.0.1:9/v1"


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "isorag_pyg.cli", *args], check=False, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env}, timeout=300)


def test_isorag_index_with_an_embedding_server_records_it_and_leaves_nothing_on_failure(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"T{i}", "text": f"passage {i} about T{(i + 1) % 6}"}) + "\n" for i in range(6)))
    with FakeEmbeddings(fail_on={"T3\npassage 3 about T4": "500"}) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "secret-key", "ISORAG_CACHE_DIR": str(tmp_path / "cache")}
        failed = run_cli("index", str(corpus), str(tmp_path / "index"), "--encoder-backend", "openai", "--encoder", "m", "--quiet", env=env)
        assert failed.returncode == 1 and not (tmp_path / "index").exists()
        assert "failed batch 1 of 1" in failed.stderr and len(failed.stderr.strip().splitlines()) == 1
        server.fail_on.clear()
        built = run_cli("index", str(corpus), str(tmp_path / "index"), "--encoder-backend", "openai", "--encoder", "m", "--quiet", env=env)
        assert built.returncode == 0, built.stderr
        manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
        assert manifest["encoder"] == {"name": "m", "fingerprint": "openai:m", "dim": 16, "backend": "openai", "base_url": server.base_url}
        assert "secret-key" not in (tmp_path / "index" / "manifest.json").read_text()
        index = ISORAGIndex.load(tmp_path / "index")
        asked = index.encode_questions(["what about T2?"])
        assert torch.allclose(asked.embeddings, expected(["what about T2?"]), atol=1e-6)


def test_pool_tokens_needs_the_openai_backend(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"title": "A", "text": "alpha"}) + "\n")
    refused = run_cli("index", str(corpus), str(tmp_path / "index"), "--pool-tokens", "--quiet", env={})
    assert refused.returncode == 1 and "--pool-tokens" in refused.stderr and "--encoder-backend openai" in refused.stderr
    assert not (tmp_path / "index").exists()


def test_an_openai_index_refuses_another_backend_for_its_questions():
    passages = [{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}]
    with FakeEmbeddings() as server:
        index = ISORAGIndex.build(passages, encoder=OpenAIEncoder("m", server.base_url, cache_dir=None), f_theta=None,
                                  phi=PhiSpec(p=0), progress=False)
    from isorag_pyg.encoders import SentenceEncoder
    with pytest.raises(ValueError, match="fingerprint mismatch"):
        index.encoder = SentenceEncoder(cache_dir=None)


@pytest.mark.slow
@pytest.mark.llama_server
def test_llama_cpp_server_in_embedding_mode(llama_server_installed, gemma_gguf, tmp_path):
    """The real path: llama-cpp-python's server embeds with the packaged Gemma GGUF (poor
    embeddings for retrieval, but a real OpenAI-compatible /v1/embeddings). This GGUF has no
    pooling type, so the server answers one vector per token: refused, or averaged on request."""
    from isorag_pyg.qa.llama_server import LlamaServer

    passages = [{"title": t, "text": f"{t} is a city in {c}."} for t, c in [("Paris", "France"), ("Berlin", "Germany"), ("Rome", "Italy")]]
    with LlamaServer(gemma_gguf, alias="gemma-embed", embedding=True) as server:
        with pytest.raises(EmbeddingServerError, match="one vector per token for batch 1 of 1"):
            OpenAIEncoder("gemma-embed", server.base_url, cache_dir=None).encode(["Paris"])
        encoder = OpenAIEncoder("gemma-embed", server.base_url, batch_size=2, concurrency=2, cache_dir=tmp_path, pool_tokens=True)
        index = ISORAGIndex.build(passages, encoder=encoder, f_theta=None, phi=PhiSpec(p=0), progress=False)
        index.save(tmp_path / "index")
        again = OpenAIEncoder("gemma-embed", server.base_url, batch_size=2, cache_dir=tmp_path, pool_tokens=True).encode([p["title"] + "\n" + p["text"]
                                                                                                       for p in passages])
        hits = ISORAGIndex.load(tmp_path / "index").retrieve(["Paris is a city in France."], k=3, retriever="dense")
        # the command line too: --pool-tokens, recorded with the index so its questions are pooled alike
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(p) + "\n" for p in passages))
        env = {"OPENAI_BASE_URL": server.base_url, "ISORAG_CACHE_DIR": str(tmp_path / "cli_cache")}
        refused = run_cli("index", str(corpus), str(tmp_path / "cli_refused"), "--encoder-backend", "openai", "--encoder", "gemma-embed", "--quiet", env=env)
        built = run_cli("index", str(corpus), str(tmp_path / "cli"), "--encoder-backend", "openai", "--encoder", "gemma-embed", "--pool-tokens",
                        "--quiet", env=env)
        cli_hits = ISORAGIndex.load(tmp_path / "cli").retrieve(["Paris is a city in France."], k=1, retriever="dense")
    assert refused.returncode == 1 and "pool_tokens" in refused.stderr and built.returncode == 0, built.stderr
    assert json.loads((tmp_path / "cli" / "manifest.json").read_text())["encoder"]["pool_tokens"] is True and cli_hits[0][0].title == "Paris"
    assert index.embeddings.shape == (3, encoder.dim) and encoder.dim > 100
    assert torch.allclose(index.embeddings.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.equal(again, index.embeddings)  # the rerun came from the cache
    assert len(hits[0]) == 3 and hits[0][0].title == "Paris"


def test_the_openai_encoder_config_passes_pool_tokens():
    from hydra import compose, initialize_config_dir

    from isorag_pyg.jobs import config as conf

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("eval", overrides=["encoder=openai", "encoder.model=m", "encoder.base_url=http://127.0.0.1:9/v1", "encoder.pool_tokens=true"])
    encoder = conf.encoder(cfg.encoder)
    assert encoder.pool_tokens and encoder.fingerprint == "openai:m+mean-of-tokens"
    cfg.encoder.pool_tokens = "no"  # a string is not a switch
    with pytest.raises(TypeError, match="pool_tokens must be true or false, got 'no'"):
        conf.encoder(cfg.encoder)
