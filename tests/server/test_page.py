"""The web page at ``GET /`` and ``POST /explain``, in process: the page's files come from the
package and load nothing from elsewhere, the graph is ``index.explain``'s, bad input gets the
server's JSON errors, and with an API key the page opens while its requests need the key.
The page in a real browser: tests/server/test_page_browser.py (slow)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.server import ServerSettings, create_app
from isorag_pyg.server.access import OPEN_PATHS
from isorag_pyg.server.page import ASSETS, PAGE_PATHS

SMALL = {"num_entities": 60, "num_hubs": 2, "hub_size": 15, "num_questions": 12}
#: A question whose local graph has kept and pruned edges and a query-matched entity seed.
QUESTION = generate_synthetic_dataset(**SMALL).questions[0].text
STATIC = Path(__file__).resolve().parents[2] / "isorag_pyg" / "server" / "static"
KEY = "page-key-0123456789"


def synthetic_index() -> ISORAGIndex:
    """Passages with title mentions and an entity graph, and a filter that prunes plenty (as tuned
    knobs may): a local graph with kept and pruned edges and a query-matched entity seed."""
    corpus = generate_synthetic_dataset(**SMALL).corpus
    index = ISORAGIndex.build(corpus, graph={"title_mention": {}, "entity_graph": {}}, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    index.set_knobs("iso", {**index.knobs["iso"], "beta": 0.5})
    return index


@pytest.fixture(scope="module")
def index() -> ISORAGIndex:
    return synthetic_index()


@pytest.fixture(scope="module")
def client(index) -> Iterator[TestClient]:
    with TestClient(create_app(index, ServerSettings(batch_window_ms=1, max_k=20, max_question_chars=300)), base_url="http://localhost") as client:
        yield client


def test_the_page_and_its_files_come_from_the_package_and_load_nothing_from_elsewhere(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in page.headers["content-security-policy"]  # the browser itself refuses anything from elsewhere
    for element in ('id="question"', 'id="answer"', 'id="passages"', 'id="graph"'):
        assert element in page.text
    linked = re.findall(r'(?:src|href)="([^"#]+)"', page.text)
    # relative: the page works behind a path prefix too; "data:,": an empty icon, so that the browser asks for no /favicon.ico
    assert sorted(linked) == sorted(["data:,", *(f"static/{name}" for name in ASSETS)])
    for name, media_type in ASSETS.items():
        served = client.get(f"/static/{name}")
        assert served.status_code == 200 and served.headers["content-type"] == media_type
        assert served.content == (STATIC / name).read_bytes()
    assert client.get("/static/missing.js").status_code == 404
    for path in STATIC.iterdir():
        text = path.read_text()
        assert not re.search(r"\b(?:https?|wss?|ftp):|//[a-z0-9.-]+\.[a-z]{2,}/|@import|\burl\(", text, re.IGNORECASE), path.name
    assert {p.name for p in STATIC.iterdir()} == {"index.html", *ASSETS}
    assert "/" not in client.get("/openapi.json").json()["paths"]  # not API


def test_the_page_files_are_package_data():
    """The files the wheel ships: pyproject's package-data globs (the wheel itself: test_page_browser.py, slow)."""
    pyproject = (STATIC.parents[2] / "pyproject.toml").read_text()
    table = pyproject.split("[tool.setuptools.package-data]")[1].split("\n[")[0]
    globs = re.findall(r'"(static/[^"]+)"', re.search(r'^"isorag_pyg\.server" = \[(.*)\]', table, re.MULTILINE).group(1))
    assert all(any(path.match(glob.split("/")[-1]) for glob in globs) for path in STATIC.iterdir())


def test_explain_answers_index_explain_with_every_node_titled(client, index):
    answered = client.post("/explain", json={"question": QUESTION, "k": 5})
    assert answered.status_code == 200, answered.text
    graph = answered.json()
    assert graph == json.loads(json.dumps(index.explain(QUESTION, k=5)))
    assert answered.headers["x-index-version"] == str(index.generation)
    nodes = set(graph["candidates"])
    assert graph["kept_edges"] and graph["pruned_edges"] and graph["entity_seeds"]  # all a picture shows
    assert all(u in nodes and v in nodes for u, v in graph["kept_edges"] + graph["pruned_edges"])
    assert set(graph["seeds"]) | set(graph["entity_seeds"]) | {t["id"] for t in graph["top"]} <= nodes == set(graph["ppr"]) == set(graph["titles"])
    passages = {p.id: p.title for p in index.passages}
    assert all(graph["titles"][n] == (passages[n] if n in passages else n.removeprefix("entity:")) for n in nodes)
    assert len(graph["top"]) == 5 and client.post("/explain", json={"question": QUESTION}).json()["top"] == graph["top"]  # k = 5 by default


@pytest.mark.parametrize(("body", "status", "detail"), [
    ({"question": "", "k": 5}, 422, "the question is empty"),
    ({"question": " \t", "k": 5}, 422, "the question is empty"),
    ({"question": "x" * 301}, 422, "the question has 301 characters; the limit is 300"),
    ({"question": "Where?", "k": 0}, 422, "k must lie between 1 and 20, got 0"),
    ({"question": "Where?", "k": 21}, 422, "k must lie between 1 and 20, got 21"),
    ({"question": "Where?", "k": "5"}, 422, "k: Input should be a valid integer"),
    ({"question": ["Where?"]}, 422, "question: Input should be a valid string"),
    ({"k": 5}, 422, "question: Field required"),
    ({"question": "Where?", "retriever": "iso"}, 422, "retriever: Extra inputs are not permitted"),
])
def test_bad_explain_requests_get_the_servers_json_errors(client, body, status, detail):
    answered = client.post("/explain", json=body)
    assert (answered.status_code, answered.json()) == (status, {"detail": detail})


def test_malformed_or_non_json_explain_requests_are_refused(client):
    malformed = client.post("/explain", content=b'{"question": ', headers={"content-type": "application/json"})
    assert malformed.status_code == 400 and malformed.json()["detail"].startswith("malformed JSON")
    assert client.post("/explain", content=b'{"question": "x"}', headers={"content-type": "text/plain"}).status_code == 415
    assert client.post("/explain", json={"question": "x"}, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post("/explain", json={"question": QUESTION}).status_code == 200  # and the server serves on


def test_with_an_api_key_the_page_opens_and_its_requests_need_the_key(index):
    assert PAGE_PATHS <= OPEN_PATHS
    with TestClient(create_app(index, ServerSettings(batch_window_ms=1, api_key=KEY)), base_url="http://localhost") as client:
        for path in PAGE_PATHS:
            assert client.get(path).status_code == 200, path  # a browser cannot send a key when it opens a page
        refused = client.post("/explain", json={"question": QUESTION})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert client.post("/explain", json={"question": QUESTION}, headers={"authorization": f"Bearer {KEY}"}).status_code == 200
        assert client.get("/info").status_code == 401
    script = (STATIC / "page.js").read_text()
    assert "sessionStorage" in script and "authorization = `Bearer ${key}`" in script  # what the page sends, the header the guard checks
