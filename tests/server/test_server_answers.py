"""The server's answers: ``POST /answer`` (JSON and server-sent events), the OpenAI-compatible
``/v1/models`` and ``/v1/chat/completions`` (with the official ``openai`` client against a real
uvicorn server, both modes), bad input, a reader that refuses, times out or sends garbage, and a
client that goes away mid-stream; the server keeps serving through all of it (a fake reader)."""
from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from fake_llm_server import FakeLLM
from fastapi.testclient import TestClient
from uvicorn_thread import serving

from isorag_pyg import ISORAGIndex
from isorag_pyg.qa.reader_spec import ReaderSpec
from isorag_pyg.server.app import create_app
from isorag_pyg.server.settings import ServerSettings

QUESTION = "Which town is known for craft number 5?"
ANSWERS = {QUESTION: "Quen 5 [1]", "long": " ".join(f"word{i}" for i in range(300))}


def events(text: str) -> list[tuple[str, dict]]:
    """(event, data) of a server-sent event stream."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


@pytest.fixture(scope="module")
def llm():
    with FakeLLM(answers=ANSWERS, failures={"slow": ["timeout"] * 100, "garbage": ["malformed"] * 100}, delay=3, piece_delay=0.0) as fake:
        yield fake


@pytest.fixture(scope="module")
def client(saved, llm):
    reader = ReaderSpec(kind="openai", base_url=llm.base_url, model="fake", timeout=1).make()
    with TestClient(create_app(ISORAGIndex.load(saved), ServerSettings(max_question_chars=500, max_k=20), reader=reader),
                    base_url="http://localhost") as client:
        yield client


def test_answer_gives_the_answer_its_citations_passages_and_timings(client):
    response = client.post("/answer", json={"question": QUESTION, "k": 3})
    body = response.json()
    assert response.status_code == 200 and response.headers["x-index-version"] == "1"
    assert set(body) == {"question", "answer", "citations", "passages", "timings"} and body["answer"] == "Quen 5 [1]"
    assert [p["n"] for p in body["passages"]] == [1, 2, 3] and set(body["passages"][0]) == {"n", "id", "title", "text", "score"}
    assert body["citations"] == [{"n": 1, "id": body["passages"][0]["id"], "title": body["passages"][0]["title"], "by": "marker"}]
    retrieved = client.post("/retrieve", json={"questions": [QUESTION], "k": 3}).json()[0]["results"]
    assert [p["id"] for p in body["passages"]] == [r["id"] for r in retrieved]  # the same retrieval
    assert {"retrieval_s", "reader_s", "first_token_s", "prompt_tokens", "completion_tokens", "truncated"} <= set(body["timings"])


def test_streamed_answer_sends_passages_then_tokens_then_done(client):
    response = client.post("/answer", json={"question": QUESTION, "k": 3, "stream": True})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    sent = events(response.text)
    assert [name for name, _ in sent] == ["passages", "token", "token", "token", "done"]
    assert "".join(data["text"] for name, data in sent if name == "token") == sent[-1][1]["answer"] == "Quen 5 [1]"
    assert sent[0][1]["passages"] == sent[-1][1]["passages"] and sent[-1][1]["citations"][0]["n"] == 1


@pytest.mark.parametrize("body,status,detail", [
    ({"question": ""}, 422, "the question is empty"),
    ({"question": "   "}, 422, "the question is empty"),
    ({"question": "x" * 501}, 422, "the question has 501 characters; the limit is 500"),
    ({"question": QUESTION, "k": 0}, 422, "k must lie between 1 and 20, got 0"),
    ({"question": QUESTION, "k": 21}, 422, "k must lie between 1 and 20, got 21"),
    ({"question": QUESTION, "retriever": "nope"}, 422, "unknown retriever 'nope'"),
    ({"question": QUESTION, "stream": "yes"}, 422, "stream: Input should be a valid boolean"),
    ({"questions": [QUESTION]}, 422, "question: Field required"),
])
def test_bad_answer_requests_get_one_line_errors(client, body, status, detail):
    response = client.post("/answer", json=body)
    assert response.status_code == status and detail in response.json()["detail"] and "\n" not in response.json()["detail"]


def test_a_reader_that_times_out_or_sends_garbage_is_a_504_or_502_with_the_passages(client):
    slow = client.post("/answer", json={"question": "slow", "k": 2})
    assert slow.status_code == 504 and "did not answer within 1" in slow.json()["detail"] and len(slow.json()["passages"]) == 2
    garbage = client.post("/answer", json={"question": "garbage", "k": 2})
    assert garbage.status_code == 502 and "sent no completion" in garbage.json()["detail"] and len(garbage.json()["passages"]) == 2
    streamed = events(client.post("/answer", json={"question": "slow", "k": 2, "stream": True}).text)
    assert [name for name, _ in streamed] == ["passages", "error"] and streamed[1][1]["status"] == 504
    assert client.post("/answer", json={"question": QUESTION}).status_code == 200  # still serving


def test_a_refusing_reader_is_a_502_and_no_reader_a_503_both_with_the_passages(saved):
    refusing = ReaderSpec(kind="openai", base_url="http://127.0.0.1:9/v1", model="m").make()
    for reader, status, detail in ((refusing, 502, "cannot reach the generator"), (None, 503, "this server has no reader")):
        with TestClient(create_app(ISORAGIndex.load(saved), reader=reader), base_url="http://localhost") as client:
            response = client.post("/answer", json={"question": QUESTION, "k": 2})
            assert response.status_code == status and detail in response.json()["detail"] and len(response.json()["passages"]) == 2
            chat = client.post("/v1/chat/completions", json={"model": "isorag", "messages": [{"role": "user", "content": QUESTION}]})
            assert chat.status_code == status and detail in chat.json()["detail"]
            assert client.post("/retrieve", json={"questions": [QUESTION]}).status_code == 200
            assert client.get("/info").json()["reader"] == (None if reader is None else "m")


def test_chat_completions_answer_the_last_user_message_with_the_conversation_and_citations(client, llm):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Where is Quen 5?"},
                {"role": "assistant", "content": "4 miles from Orlin 6 [1]"}, {"role": "user", "content": QUESTION}]
    response = client.post("/v1/chat/completions", json={"model": "isorag", "messages": messages, "temperature": 0.2, "k": 3})
    body = response.json()
    assert response.status_code == 200 and body["object"] == "chat.completion" and body["choices"][0]["message"]["content"] == "Quen 5 [1]"
    assert body["citations"][0]["n"] == 1 and set(body["citations"][0]) == {"n", "id", "title", "by"}
    sent = llm.seen[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"] and sent[1]["content"] == "Where is Quen 5?"
    assert QUESTION in sent[-1]["content"] and "[3] " in sent[-1]["content"] and "[4] " not in sent[-1]["content"]
    models = client.get("/v1/models").json()
    assert models["object"] == "list" and {"isorag", "isorag-dense", "isorag-iso"} <= {m["id"] for m in models["data"]}
    other = client.post("/v1/chat/completions", json={"model": "gpt-4", "messages": messages})  # any name: the default retriever
    assert other.status_code == 200 and other.json()["model"] == "gpt-4" and other.json()["citations"] == body["citations"]
    earlier = client.post("/v1/chat/completions", json={"model": "isorag", "k": 3, "messages": [*messages, {"role": "user", "content": " "}]})
    assert earlier.status_code == 200 and llm.seen[-1]["messages"] == sent  # the last user message with text
    for bad, detail in (([messages[0]], "no user message with a question"), ([{"role": "user", "content": "x" * 501}], "message 0 has 501 characters"),
                        ([{"role": "user", "content": ["parts"]}], "messages.0.content: Input should be a valid string")):
        refused = client.post("/v1/chat/completions", json={"model": "isorag", "messages": bad})
        assert refused.status_code == 422 and detail in refused.json()["detail"]
    unknown = client.post("/v1/chat/completions", json={"model": "isorag", "messages": messages, "retriever": ""})
    assert unknown.status_code == 422 and "unknown retriever ''" in unknown.json()["detail"]


def test_answer_routes_need_the_api_key(saved, llm):
    reader = ReaderSpec(kind="openai", base_url=llm.base_url, model="fake").make()
    with TestClient(create_app(ISORAGIndex.load(saved), ServerSettings(api_key="k" * 16), reader=reader), base_url="http://localhost") as client:
        for method, path, body in (("post", "/answer", {"question": QUESTION}), ("get", "/v1/models", None),
                                   ("post", "/v1/chat/completions", {"model": "isorag", "messages": [{"role": "user", "content": QUESTION}]})):
            assert getattr(client, method)(path, **({"json": body} if body else {})).status_code == 401
            headers = {"Authorization": f"Bearer {'k' * 16}"}
            assert getattr(client, method)(path, headers=headers, **({"json": body} if body else {})).status_code == 200


@pytest.fixture(scope="module")
def live(saved):
    """A real uvicorn server over the index with a slowly streaming fake reader: (base URL, the fake)."""
    with FakeLLM(answers=ANSWERS, piece_delay=0.05) as fake:
        reader = ReaderSpec(kind="openai", base_url=fake.base_url, model="fake").make()
        with serving(create_app(ISORAGIndex.load(saved), reader=reader), lifespan="on", read_timeout=30) as (host, port):
            yield f"http://{host}:{port}", fake


def test_the_official_openai_client_uses_the_index_as_a_model_in_both_modes(live):
    url, _ = live
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    assert "isorag" in [m.id for m in client.models.list()]
    whole = client.chat.completions.create(model="isorag", messages=[{"role": "user", "content": QUESTION}])
    assert whole.choices[0].message.content == "Quen 5 [1]" and whole.model_extra["citations"][0]["n"] == 1
    chunks = list(client.chat.completions.create(model="isorag-dense", messages=[{"role": "user", "content": QUESTION}], stream=True,
                                                 extra_body={"k": 2}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Quen 5 [1]"
    assert chunks[-1].choices[0].finish_reason == "stop" and chunks[-1].model_extra["citations"][0]["n"] == 1


def test_a_client_that_goes_away_mid_stream_ends_its_reader_request_and_the_server_serves_on(live):
    url, fake = live
    before = fake.disconnects
    for path, body in (("/answer", {"question": "long", "stream": True}),
                       ("/v1/chat/completions", {"model": "isorag", "stream": True, "messages": [{"role": "user", "content": "long"}]})):
        streamed = fake.streamed
        with httpx.Client(timeout=30) as http, http.stream("POST", f"{url}{path}", json=body) as response:
            lines = response.iter_lines()
            while "word3" not in next(lines):
                pass
        deadline = time.monotonic() + 10
        while fake.disconnects == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.disconnects == before + 1 and fake.streamed - streamed < 100  # of 300 pieces
        before = fake.disconnects
    assert httpx.post(f"{url}/answer", json={"question": QUESTION}, timeout=30).json()["answer"] == "Quen 5 [1]"
