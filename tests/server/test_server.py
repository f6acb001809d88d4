"""`isorag serve`: the real server process over HTTP (answers, micro-batching, bad input,
start-up errors, shutdown), and its micro-batcher and engine in process."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.index.results import answer_json
from isorag_pyg.server import BatcherUnavailable, MicroBatcher, RetrievalEngine, RetrievalRequest, ServerSettings

SMALL = {"num_entities": 60, "num_hubs": 2, "hub_size": 15, "num_questions": 12}
QUESTIONS = [q.text for q in generate_synthetic_dataset(**SMALL).questions]
#: Low limits, so that every limit is cheap to cross; a wide window, so that concurrent requests surely meet.
LIMITS = ["--max-questions", "8", "--max-k", "20", "--max-question-chars", "300", "--max-body-bytes", "4096"]


class Server:
    """``isorag serve`` in a subprocess on a free 127.0.0.1 port (stderr in a file)."""

    def __init__(self, index_dir: Path, log: Path, *args: str):
        """Start the process; :meth:`ready` waits for it (so that several can start at once)."""
        self.log = log
        env = {k: v for k, v in os.environ.items() if k != "ISORAG_DEBUG"}
        with open(log, "w") as stderr:
            self.process = subprocess.Popen([sys.executable, "-m", "isorag_pyg.cli", "serve", str(index_dir), "--port", "0", *args],
                                            stdout=subprocess.DEVNULL, stderr=stderr, env=env)

    def ready(self) -> Server:
        self.url = self._wait_until_listening()
        self.client = httpx.Client(base_url=self.url, timeout=60)
        assert self.client.get("/health").json()["status"] == "ok"
        return self

    def _wait_until_listening(self, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := re.search(r"listening on (http://\S+)", self.log.read_text()):
                return found.group(1)
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        self.process.kill()
        raise AssertionError(f"the server did not start in {timeout} s: {self.log.read_text()[-2000:]}")

    def stats(self) -> dict[str, int]:
        return self.client.get("/health").json()["stats"]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        """Send ``sig`` and wait for the process; its exit status."""
        self.client.close()
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def post_all(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """All ``bodies`` POSTed to ``/retrieve`` at once, one connection each."""

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=len(bodies))) as client:
            return list(await asyncio.gather(*(client.post("/retrieve", json=body) for body in bodies)))

    return asyncio.run(run())


def ranked(answer: dict[str, Any]) -> list[str]:
    return [r["id"] for r in answer["results"]]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    corpus = generate_synthetic_dataset(**SMALL).corpus
    # a passage graph (title mentions), as before the automatic default: the k-dependence test below is about its pool
    index = ISORAGIndex.build(corpus, graph={"title_mention": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    return index.save(tmp_path_factory.mktemp("server") / "index")


@pytest.fixture(scope="module")
def index(index_dir) -> ISORAGIndex:
    return ISORAGIndex.load(index_dir)


@pytest.fixture(scope="module")
def server(index_dir, tmp_path_factory) -> Iterator[Server]:
    running = Server(index_dir, tmp_path_factory.mktemp("log") / "serve.log", "--batch-window-ms", "100", "--max-batch", "64", *LIMITS).ready()
    yield running
    running.stop()


@pytest.mark.slow
def test_answers_are_those_of_index_retrieve_as_isorag_query_json_prints_them(server, index):
    questions = QUESTIONS[:3]
    for retriever, k in (("iso", 4), ("bm25", 2)):
        answered = server.client.post("/retrieve", json={"questions": questions, "k": k, "retriever": retriever})
        assert answered.status_code == 200, answered.text
        expected = [answer_json(q, hits) for q, hits in zip(questions, index.retrieve(questions, k=k, retriever=retriever))]
        assert answered.json() == expected  # one request, one batch: the very same call as index.retrieve


@pytest.mark.slow
def test_concurrent_requests_share_calls_and_get_their_own_answers(server, index):
    bodies = [{"questions": [q], "k": 3 + i % 2, "retriever": "iso" if i % 4 else "dense"} for i, q in enumerate(QUESTIONS)]
    bodies.append({"questions": QUESTIONS[:2], "k": 3})
    before = server.stats()
    responses = post_all(server.url, bodies)
    after = server.stats()
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses if r.status_code != 200]
    served = {key: after[key] - before[key] for key in ("requests", "batches", "encoder_calls", "retrieval_calls")}
    assert served["requests"] == len(bodies)
    # one window gathers them: few batches, and (retriever, k) groups instead of a call per request
    assert served["batches"] <= len(bodies) // 2 and served["retrieval_calls"] < len(bodies), served
    assert after["largest_batch"] > 1
    for body, response in zip(bodies, responses):
        answers = response.json()
        assert [a["question"] for a in answers] == body["questions"]
        alone = index.retrieve(body["questions"], k=body["k"], retriever=body.get("retriever", "iso"))
        for answer, hits in zip(answers, alone):
            assert ranked(answer) == [hit.id for hit in hits]
            assert [r["score"] for r in answer["results"]] == pytest.approx([hit.score for hit in hits], abs=1e-4)


@pytest.mark.slow
def test_bad_input_is_a_4xx_with_a_message_and_the_server_keeps_serving(server):
    json_cases = [
        ({"questions": []}, 422, "non-empty list"),
        ({"questions": "one question"}, 422, "questions: Input should be a valid list"),
        ({"questions": ["ok", 3]}, 422, "questions.1: Input should be a valid string"),
        ({"questions": ["   "]}, 422, "question 0 is empty"),
        ({"questions": ["q"] * 9}, 422, "at most 8 questions"),
        ({"questions": ["q" * 301]}, 422, "the limit is 300"),
        ({"questions": ["q"], "k": 0}, 422, "k must lie between 1 and 20"),
        ({"questions": ["q"], "k": -3}, 422, "k must lie between 1 and 20"),
        ({"questions": ["q"], "k": 21}, 422, "k must lie between 1 and 20"),
        ({"questions": ["q"], "k": "5"}, 422, "k: Input should be a valid integer"),
        ({"questions": ["q"], "k": 2.5}, 422, "k: Input should be a valid integer"),
        ({"questions": ["q"], "retriever": "nope"}, 422, "unknown retriever 'nope'"),
        ({"questions": ["q"], "top_k": 3}, 422, "top_k: Extra inputs are not permitted"),
        ([1, 2], 422, "the body must be a JSON object"),
        ({"questions": ["q" * 100] * 8 + ["x" * 4000]}, 413, "over the limit of 4096 bytes"),
    ]
    raw_cases = [
        (b'{"questions": ["q"', 400, "malformed JSON"),
        (b"not json at all", 400, "malformed JSON"),
        (b"", 422, "the body must be a JSON object"),
        (b'{"questions": ["\xff"]}', 400, "error parsing the body"),
        (b'{"questions": ["ok", "\\ud800 lone"]}', 422, "question 1 is not valid Unicode"),
    ]
    requests = [{"json": body} for body, _, _ in json_cases] + [{"content": raw, "headers": {"content-type": "application/json"}}
                                                                  for raw, _, _ in raw_cases]
    for kwargs, (_, status, message) in zip(requests, json_cases + raw_cases):
        response = server.client.post("/retrieve", **kwargs)
        assert response.status_code == status, (kwargs, response.text)
        assert message in response.json()["detail"], (kwargs, response.text)
    streamed = server.client.post("/retrieve", content=iter([b'{"questions": ["', b"q" * 5000, b'"]}']),  # chunked, no length
                                  headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert server.client.post("/retrieve", json={"questions": ["still there?"], "k": 1}).status_code == 200
    assert server.process.poll() is None and server.stats()["failed_requests"] == 0


@pytest.mark.slow
def test_health_and_info(server, index):
    health = server.client.get("/health").json()
    assert health["status"] == "ok" and health["passages"] == len(index)
    assert {"requests", "questions", "batches", "encoder_calls", "retrieval_calls", "failed_requests", "largest_batch"} <= set(health["stats"])
    info = server.client.get("/info").json()
    assert info["index"] == json.loads(json.dumps(index.info()))
    assert info["index"]["counts"]["passages"] == len(index) and "iso" in info["retrievers"]
    assert info["settings"] == ServerSettings(batch_window_ms=100, max_batch=64, max_questions=8, max_k=20, max_question_chars=300,
                                              max_body_bytes=4096).to_dict()


@pytest.mark.slow
def test_without_batching_every_request_is_its_own_call_and_signals_stop_it(index_dir, tmp_path):
    servers = {sig: Server(index_dir, tmp_path / f"serve-{sig}.log", "--no-batching") for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, server in servers.items():
        server.ready()
        responses = post_all(server.url, [{"questions": [q], "k": 2} for q in QUESTIONS[:6]])
        assert all(r.status_code == 200 for r in responses)
        stats = server.stats()
        assert stats["batches"] == stats["retrieval_calls"] == stats["requests"] == 6 and stats["largest_batch"] == 1
        start = time.monotonic()
        status = server.stop(sig)
        assert time.monotonic() - start < 10, "shutdown took too long"
        assert status in (0, -sig, 128 + sig), status
        log = server.log.read_text()
        assert "Traceback" not in log and "ERROR" not in log, log[-2000:]


@pytest.mark.slow
def test_start_up_errors_are_one_line_and_a_non_zero_exit(index_dir, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        cases = [
            ((str(tmp_path / "missing"),), "no such index directory"),
            ((str(index_dir), "--port", port), f"cannot listen on 127.0.0.1:{port}"),
            ((str(index_dir), "--max-batch", "0"), "max_batch must be a positive integer"),
            ((str(index_dir), "--no-batching", "--max-batch", "64"), "--no-batching answers every request on its own"),
            ((str(index_dir), "--api-key", " key "), "the API key must be"),
        ]
        for args, message in cases:
            done = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", "serve", *args], check=False, capture_output=True, text=True, timeout=300)
            assert done.returncode == 1, (args, done.stderr[-1500:])
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith("isorag serve: error:") and message in last and "Traceback" not in done.stderr, done.stderr[-1500:]


@pytest.mark.slow
def test_a_server_beyond_loopback_warns_without_a_key_and_takes_one_from_the_environment(index_dir, tmp_path, monkeypatch):
    open_server = Server(index_dir, tmp_path / "open.log", "--host", "0.0.0.0")
    monkeypatch.setenv("ISORAG_API_KEY", "from-the-environment")
    keyed = Server(index_dir, tmp_path / "keyed.log", "--host", "0.0.0.0", "--allowed-host", "127.0.0.1")
    try:
        url = open_server._wait_until_listening()
        log = open_server.log.read_text()
        assert "WARNING: listening on 0.0.0.0, beyond this machine, without an API key" in log and "--allowed-host" in log
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/health").status_code == 400  # Host 0.0.0.0:PORT is not a name it answers to
        url = keyed._wait_until_listening().replace("0.0.0.0", "127.0.0.1")
        assert "WARNING" not in keyed.log.read_text()
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/health").status_code == 200 and client.get("/info").status_code == 401
            assert client.get("/info", headers={"authorization": "Bearer from-the-environment"}).status_code == 200
    finally:
        for server in (open_server, keyed):
            server.process.terminate()
            server.process.wait(30)


# ------------------------------------------------------------------------------- in process


def test_micro_batcher_groups_concurrent_requests_and_isolates_failures():
    calls: list[list[str]] = []
    worker_threads: set[str] = set()

    def run(batch: list[str]) -> list[str | Exception]:
        calls.append(batch)
        worker_threads.add(threading.current_thread().name)
        if "explode" in batch:
            raise RuntimeError("the whole batch broke")
        return [ValueError("bad item") if item == "!" else item.upper() for item in batch]

    async def scenario() -> None:
        batcher: MicroBatcher[str, str] = MicroBatcher(run, window=0.05, max_batch=4, max_pending=8)
        batcher.start()
        # items are strings, len(item) of them each: "explode" is a batch of its own
        outcomes = await asyncio.gather(*(batcher.submit(x) for x in "a!cdef"), return_exceptions=True)
        assert outcomes[0] == "A" and isinstance(outcomes[1], ValueError) and outcomes[2:] == ["C", "D", "E", "F"]
        assert calls == [["a", "!", "c", "d"], ["e", "f"]]  # max_batch items per call, in arrival order
        with pytest.raises(RuntimeError, match="whole batch"):
            await batcher.submit("explode")
        assert await batcher.submit("g") == "G"  # the worker survived
        with pytest.raises(BatcherUnavailable, match="busy"):
            await batcher.submit("x" * 9)  # more items than max_pending
        waiting = asyncio.ensure_future(batcher.submit("h"))
        await asyncio.sleep(0)
        await batcher.close()
        with pytest.raises(BatcherUnavailable, match="shutting down"):
            await waiting

    asyncio.run(scenario())
    assert worker_threads == {"isorag-batch_0"} and threading.current_thread().name not in worker_threads


def test_micro_batcher_without_a_window_still_takes_what_is_queued():
    started = threading.Event()
    release = threading.Event()
    calls: list[list[str]] = []

    def run(batch: list[str]) -> list[str]:
        calls.append(batch)
        started.set()
        release.wait(5)
        return batch

    async def scenario() -> None:
        batcher: MicroBatcher[str, str] = MicroBatcher(run, window=0.0, max_batch=3, max_pending=10)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit("a"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        rest = [asyncio.ensure_future(batcher.submit(x)) for x in "bcde"]  # queued while the worker is busy
        await asyncio.sleep(0.05)
        release.set()
        assert await asyncio.gather(first, *rest) == list("abcde")
        await batcher.close()

    asyncio.run(scenario())
    assert calls == [["a"], ["b", "c", "d"], ["e"]]


def test_engine_answers_a_mixed_batch_as_each_request_alone_and_fails_only_the_bad_one(index, monkeypatch):
    engine = RetrievalEngine(index)
    requests = [RetrievalRequest((QUESTIONS[0],), 5, "iso"), RetrievalRequest(tuple(QUESTIONS[1:3]), 2, "iso"),
                RetrievalRequest((QUESTIONS[3],), 5, "dense"), RetrievalRequest((QUESTIONS[4],), 5, "iso")]
    outcomes = engine.run(requests)
    assert engine.stats["encoder_calls"] == 1 and engine.stats["retrieval_calls"] == 3  # (iso, 5), (iso, 2), (dense, 5)
    for request, hits in zip(requests, outcomes):
        alone = index.retrieve(list(request.questions), k=request.k, retriever=request.retriever)
        assert [[h.id for h in q] for q in hits] == [[h.id for h in q] for q in alone]
    iso = engine.retriever("iso")
    original = iso.retrieve

    def fragile(queries, k, trace=False):
        if any("boom" in text for text in queries.texts):
            raise RuntimeError("boom")
        return original(queries, k, trace)

    monkeypatch.setattr(iso, "retrieve", fragile)
    outcomes = engine.run([RetrievalRequest((QUESTIONS[0],), 5, "iso"), RetrievalRequest(("boom?",), 5, "iso")])
    assert [h.id for h in outcomes[0][0]] == [h.id for h in index.retrieve([QUESTIONS[0]], k=5)[0]]
    assert isinstance(outcomes[1], RuntimeError) and engine.stats["failed_requests"] == 1


def test_iso_answers_depend_on_k_so_requests_with_different_k_do_not_share_a_call(index):
    # ISO-RAG's candidate pool is over_retrieval * k: the top 5 of a k = 20 call differ from k = 5
    # for some question, which is why the engine groups requests by (retriever, k)
    short = index.retrieve(QUESTIONS, k=5)
    long = index.retrieve(QUESTIONS, k=20)
    assert any([h.id for h in s] != [h.id for h in t[:5]] for s, t in zip(short, long))
