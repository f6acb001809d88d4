"""Who may call the server: the Host allow-list, the API key on every route but /health and the
web page's files (routes added later included), no cross-site writes; in process, with a stand-in encoder."""
from __future__ import annotations

import fastapi.routing
import pytest
import torch
from fastapi.testclient import TestClient

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.server import ServerSettings, create_app
from isorag_pyg.server.access import OPEN_PATHS, host_name

PASSAGES = [{"title": t, "text": f"{t} is a place."} for t in ("Paris", "Dijon", "Lyon", "Metz")]
JSON = {"content-type": "application/json"}
KEY = "s3cret-key-for-tests"


class LengthEncoder:
    """A deterministic stand-in for a sentence encoder: a text's vector is its length."""

    name, fingerprint, backend = "length", "length-v1", "torch"

    def encode(self, texts):
        return torch.stack([torch.tensor([float(len(t)), 1.0, 0.5, 0.25]) for t in texts])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    index = ISORAGIndex.build(PASSAGES, encoder=LengthEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    return index.save(tmp_path_factory.mktemp("access") / "index")


def every_route(app) -> list:
    """The app's routes, those of included routers one by one (FastAPI 0.16x keeps an included router whole in ``app.routes``)."""
    flatten = getattr(fastapi.routing, "iter_route_contexts", lambda routes: routes)
    return list(flatten(app.routes))


def app_for(saved, **settings):
    index = ISORAGIndex.load(saved)
    index.encoder = LengthEncoder()
    return create_app(index, ServerSettings(batch_window_ms=1, **settings))


def test_only_the_allowed_host_names_are_answered(saved):
    """Before: any Host was answered, so a page whose domain was re-pointed at 127.0.0.1 (DNS
    rebinding) could read the indexed passages from a browser."""
    with TestClient(app_for(saved), base_url="http://localhost") as client:
        for host in ("localhost", "localhost:8000", "127.0.0.1:1234", "[::1]:8000", "LOCALHOST."):
            assert client.get("/health", headers={"host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", ""):
            refused = client.get("/info", headers={"host": host})
            assert refused.status_code == 400 and "--allowed-host" in refused.json()["detail"], host
    with TestClient(app_for(saved, allowed_hosts=("localhost", "search.internal")), base_url="http://search.internal:8000") as client:
        assert client.get("/info").status_code == 200
    with TestClient(app_for(saved, allowed_hosts=("*",)), base_url="http://anything.example") as client:
        assert client.get("/info").status_code == 200
    assert host_name("[::1]:80") == "::1" and host_name("Example.COM.") == "example.com"


def test_with_an_api_key_every_route_but_health_needs_it_routes_added_later_included(saved):
    """Before: no authentication at all."""
    app = app_for(saved, api_key=KEY)

    @app.post("/added-later")  # as a plugin or a later version may add: covered without code of its own
    async def added() -> dict:
        return {"answer": "42"}

    @app.get("/v1/added-later")
    async def also_added() -> dict:
        return {"data": []}

    routes = [(method, route.path) for route in every_route(app) for method in sorted(getattr(route, "methods", None) or {"GET"})
              if method != "HEAD"]
    assert {("POST", "/added-later"), ("GET", "/v1/added-later"), ("POST", "/answer"), ("POST", "/v1/chat/completions"), ("GET", "/v1/models"),
            ("POST", "/explain"), ("GET", "/"), ("GET", "/openapi.json"), ("GET", "/docs")} <= set(routes)
    with TestClient(app, base_url="http://localhost") as client:
        for method, path in routes:
            path = path.replace("{", "").replace("}", "")
            for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}, {"authorization": f"Basic {KEY}"}):
                response = client.request(method, path, headers={**JSON, **headers})
                if path in OPEN_PATHS:  # /health, the web page's files
                    assert response.status_code == 200, (method, path)
                else:
                    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer", (method, path, headers)
        good = {**JSON, "authorization": f"Bearer {KEY}"}
        assert client.post("/added-later", headers=good).json() == {"answer": "42"}
        assert client.post("/retrieve", json={"questions": ["Where is Metz?"], "k": 1}, headers=good).status_code == 200
        assert client.get("/info", headers={"authorization": f"bearer {KEY}"}).json()["settings"]["api_key_required"] is True
        assert KEY not in client.get("/info", headers=good).text and KEY not in repr(app.state.settings)
        schema = client.get("/openapi.json", headers=good).json()  # states the key, so that clients and fuzzers send it
        assert schema["security"] == [{"apiKey": []}] and schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
        assert schema["paths"]["/health"]["get"]["security"] == [] and "security" not in schema["paths"]["/info"]["get"]


def test_writes_must_be_json_and_same_origin(saved):
    """Before: a cross-origin POST /reload with content-type text/plain (a request a browser sends
    from any page without asking) returned 200."""
    with TestClient(app_for(saved), base_url="http://localhost:8000") as client:
        for headers in ({"content-type": "text/plain", "origin": "http://evil.example"}, {"content-type": "text/plain"}, {},
                        {"content-type": "application/x-www-form-urlencoded"}, {**JSON, "origin": "http://evil.example"},
                        {**JSON, "origin": "null"}, {**JSON, "origin": "http://localhost:3000"}):
            for path in ("/reload", "/retrieve"):
                response = client.post(path, headers=headers, content=b'{"questions": ["Where is Metz?"]}')
                assert response.status_code in (403, 415), (path, headers, response.text)
        assert client.post("/reload", json={}, headers={"origin": "http://localhost:8000"}).json()["reloaded"] is False
        assert client.post("/reload", content=b"{}", headers={"content-type": "application/json; charset=utf-8"}).status_code == 200
        assert client.post("/reload", headers=JSON).status_code == 422  # the body is {}
        assert client.put("/retrieve", headers={"content-type": "text/plain"}).status_code == 405  # no such route: the router's answer
        assert client.get("/info", headers={"origin": "http://evil.example"}).status_code == 200  # reads are not writes


def test_api_keys_and_host_lists_are_checked():
    for bad in ("", " padded ", "tab\tinside", "nön-ascii"):
        with pytest.raises(ValueError, match="API key"):
            ServerSettings(api_key=bad)
    with pytest.raises(ValueError, match="allowed_hosts"):
        ServerSettings(allowed_hosts=())
