"""Connections a flood of idle or slow sockets cannot starve: the admission policy alone, then
uvicorn with the guarded protocol in a thread."""
from __future__ import annotations

import socket
import time

import httpx
from uvicorn_thread import echo_app, serving

from isorag_pyg.server.connection_gate import ConnectionGate


class Conn:
    def __init__(self, name: str):
        self.name, self.evicted = name, False

    def evict(self) -> None:
        self.evicted = True

    def __repr__(self) -> str:
        return self.name


def test_the_gate_closes_waiting_connections_never_busy_ones_and_fresh_before_idle():
    gate = ConnectionGate(max_connections=4, max_per_client=10)
    a, b, c, d = (Conn(n) for n in "abcd")
    for conn in (a, b, c, d):
        assert gate.opened(conn, "1.1.1.1")
    gate.busy(a)
    gate.busy(b)
    gate.waiting(b)  # answered, kept alive: idle
    e = Conn("e")
    assert gate.opened(e, "2.2.2.2") and c.evicted and not (a.evicted or b.evicted or d.evicted)  # the oldest fresh one
    gate.busy(d)
    gate.busy(e)
    f = Conn("f")
    assert gate.opened(f, "2.2.2.2") and b.evicted  # no fresh one left: the oldest idle one
    gate.busy(f)
    assert not gate.opened(Conn("g"), "3.3.3.3")  # all four busy: refused
    assert gate.describe() == {"open": 4, "waiting": 0, "accepted": 6, "refused": 1, "evicted": 2, "timed_out": 0}
    gate.closed(a)
    gate.closed(a)  # twice: no harm
    assert gate.opened(Conn("h"), "3.3.3.3") and gate.describe()["open"] == 4


def test_a_client_over_its_share_loses_its_own_oldest_waiting_connection():
    gate = ConnectionGate(max_connections=100, max_per_client=2)
    mine, theirs = [Conn(f"m{i}") for i in range(3)], Conn("t")
    assert gate.opened(theirs, "9.9.9.9")
    gate.opened(mine[0], "1.1.1.1")
    gate.busy(mine[0])  # a request in progress does not count against the share
    gate.opened(mine[1], "1.1.1.1")
    gate.opened(mine[2], "1.1.1.1")
    assert not any(c.evicted for c in (*mine, theirs))
    late = Conn("late")
    assert gate.opened(late, "1.1.1.1") and mine[1].evicted and not (mine[0].evicted or mine[2].evicted or theirs.evicted)


def test_idle_sockets_are_closed_after_the_read_timeout_and_never_starve_requests():
    """Before: the deadline started at a request's first byte and uvicorn counted idle sockets
    against limit_concurrency, so 6 silent sockets (with a limit of 5) gave every request 503."""
    gate = ConnectionGate(max_connections=5, max_per_client=5)
    with serving(echo_app, gate, read_timeout=1.0) as address:
        idle = [socket.create_connection(address) for _ in range(8)]
        time.sleep(0.3)
        with httpx.Client(base_url=f"http://{address[0]}:{address[1]}", timeout=10) as client:
            for _ in range(10):
                assert client.get("/").status_code == 200  # a fresh connection each time makes room for itself
        assert gate.describe()["evicted"] >= 3
        start = time.monotonic()
        for sock in idle:
            sock.settimeout(5)
            try:
                assert sock.recv(1) == b""  # closed by the server (evicted, or after the read timeout)
            except ConnectionResetError:
                pass
            sock.close()
        assert time.monotonic() - start < 5  # the read timeout is 1 s; a socket never closed would time out recv first
        assert gate.describe()["timed_out"] >= 1 and gate.describe()["open"] <= 1


def test_a_slow_request_is_cut_off_from_accept_and_a_kept_alive_client_keeps_its_connection():
    gate = ConnectionGate(max_connections=50, max_per_client=50)
    with serving(echo_app, gate, read_timeout=2.0) as address:
        with socket.create_connection(address, timeout=5) as slow:
            start = time.monotonic()
            request = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20
            try:
                for byte in request:
                    slow.sendall(bytes([byte]))
                    time.sleep(0.1)
                received = slow.recv(1024)
            except (BrokenPipeError, ConnectionResetError):
                received = b""
            assert received == b"" and time.monotonic() - start < 3.5  # the whole request would take 5 s
        with httpx.Client(base_url=f"http://{address[0]}:{address[1]}", timeout=10) as client:
            for _ in range(6):  # one connection, kept alive across requests spaced well under the timeout, longer than it in all
                assert client.get("/").status_code == 200
                time.sleep(0.5)
        assert gate.describe()["accepted"] == 2
