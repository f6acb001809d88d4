"""The server keeps what it loaded out of the garbage collector's full collections while it runs,
and a reload still frees the version it replaces."""
from __future__ import annotations

import gc
import weakref

import torch
from fastapi.testclient import TestClient

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.server import ServerSettings, create_app
from isorag_pyg.server.memory import freeze_long_lived

PASSAGES = [{"title": t, "text": f"{t} is a place."} for t in ("Paris", "Dijon", "Lyon", "Metz")]


class LengthEncoder:
    """A deterministic stand-in for a sentence encoder: a text's vector is its length."""

    name, fingerprint, backend = "length", "length-v1", "torch"

    def encode(self, texts):
        return torch.stack([torch.tensor([float(len(t)), 1.0, 0.5, 0.25]) for t in texts])


def test_freeze_long_lived_collects_first_and_freezes_the_rest():
    class Cycle:
        pass

    garbage = Cycle()
    garbage.me = garbage
    dead = weakref.ref(garbage)
    del garbage
    try:
        freeze_long_lived()
        assert dead() is None  # garbage already unreachable is collected, not frozen
        assert gc.get_freeze_count() > 0
        again = Cycle()  # frozen, then dropped: only freezing anew (which unfreezes first) frees it
        again.me = again
        freeze_long_lived()
        dropped = weakref.ref(again)
        del again
        gc.collect()
        assert dropped() is not None  # a frozen cycle outlives a collection
        freeze_long_lived()
        assert dropped() is None
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_the_server_freezes_while_it_runs_and_a_reload_frees_the_replaced_version(tmp_path):
    built = ISORAGIndex.build(PASSAGES, encoder=LengthEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    directory = built.save(tmp_path / "index")
    index = ISORAGIndex.load(directory)
    index.encoder = LengthEncoder()  # the index keeps the record of its encoder, not the object
    app = create_app(index, ServerSettings(batch_window_ms=1))
    del index
    assert gc.get_freeze_count() == 0
    with TestClient(app, base_url="http://localhost") as client:
        assert gc.get_freeze_count() > 0 and not tracked(app.state.served.index)  # started: the loaded index is frozen
        assert client.post("/retrieve", json={"questions": ["Where is Dijon?"], "k": 1}).status_code == 200
        serving = app.state.served.index
        serving.cycle = [serving]  # a reference cycle through the frozen index: reference counting alone cannot free it
        replaced = weakref.ref(serving)
        del serving
        built.add([{"title": "Nancy", "text": "Nancy is a place."}], encoder=LengthEncoder())
        built.save(directory)
        assert client.post("/reload", json={}).json()["reloaded"] is True
        assert client.post("/retrieve", json={"questions": ["Where is Nancy?"], "k": 1}).status_code == 200
        assert replaced() is None  # the batch after the reload freed the replaced version
        assert not tracked(app.state.served.index) and client.get("/health").json()["passages"] == 5  # and froze the new one
    assert gc.get_freeze_count() == 0  # stopped: nothing stays frozen


def test_a_reload_outside_a_running_server_freezes_nothing(tmp_path):
    built = ISORAGIndex.build(PASSAGES, encoder=LengthEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    directory = built.save(tmp_path / "index")
    index = ISORAGIndex.load(directory)
    index.encoder = LengthEncoder()
    served = create_app(index).state.served  # no lifespan: the app never started
    built.add([{"title": "Nancy", "text": "Nancy is a place."}], encoder=LengthEncoder())
    built.save(directory)
    assert served.reload()["reloaded"] is True and not served.frozen
    served.run([])
    assert gc.get_freeze_count() == 0


def tracked(obj) -> bool:
    """Whether the garbage collector's full collections still walk ``obj`` (frozen objects are
    not among ``gc.get_objects()``)."""
    return any(o is obj for o in gc.get_objects())
