"""``isorag serve``: bind, load the index, warm up, and run uvicorn until SIGINT or SIGTERM."""
from __future__ import annotations

import dataclasses
import ipaddress
import resource
import socket
import sys
from pathlib import Path

from isorag_pyg.server.settings import ServerSettings

#: Seconds in-flight requests get to finish after SIGINT / SIGTERM.
GRACEFUL_SHUTDOWN_S = 5
#: Connections the kernel holds for the server before it accepts them (at most ``net.core.somaxconn``).
BACKLOG = 4096
#: File descriptors kept for everything but connections (the index, the model, logs).
RESERVED_FDS = 256
#: Seconds an idle keep-alive connection stays open between requests.
KEEP_ALIVE_S = 5


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0: a free one), not yet listening: clients
    are refused, not left hanging, while the index and the model load. ``OSError`` when the
    address is taken or not local; ``ValueError`` for a port outside 0-65535."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must lie between 1 and 65535 (or 0 for a free one), got {port!r}")
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock


def fit_to_fd_limit(settings: ServerSettings) -> ServerSettings:
    """``settings`` with ``max_connections`` within the file descriptors this process may open,
    after raising its soft limit towards the hard one (a warning on stderr when it must shrink)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = settings.max_connections + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return settings
    fitted = max(1, soft - RESERVED_FDS)
    print(f"isorag serve: warning: this process may open {soft} files (ulimit -n), so it keeps at most {fitted} connections, "
          f"not --max-connections {settings.max_connections}", file=sys.stderr, flush=True)
    return dataclasses.replace(settings, max_connections=fitted, max_connections_per_client=min(settings.max_connections_per_client, fitted))


def exposed(settings: ServerSettings, host: str, bound: str) -> ServerSettings:
    """``settings`` with a specific listen address ``host`` (not ``0.0.0.0`` or ``::``) among the
    allowed Host names; a loud warning on stderr when ``bound`` (the address bound) is not
    loopback and there is no API key."""
    address = ipaddress.ip_address(bound.split("%", 1)[0])
    if not address.is_unspecified and host not in settings.allowed_hosts:
        settings = dataclasses.replace(settings, allowed_hosts=(*settings.allowed_hosts, host))
    if not address.is_loopback and settings.api_key is None:
        print(f"isorag serve: WARNING: listening on {host}, beyond this machine, without an API key: anyone who can reach it can read "
              "every indexed passage; set --api-key or ISORAG_API_KEY", file=sys.stderr, flush=True)
    if address.is_unspecified and "*" not in settings.allowed_hosts:
        print(f"isorag serve: requests are answered for the Host names {', '.join(settings.allowed_hosts)} only; "
              "add the names clients use with --allowed-host", file=sys.stderr, flush=True)
    return settings


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, settings: ServerSettings = ServerSettings(),
          verify: bool = True, threads: int | None = None, encoder_backend: str | None = None) -> None:
    """Serve the index in ``index_dir`` over HTTP until interrupted, with ``threads`` torch
    threads for encoding and retrieval (default: torch's, one per core), questions embedded on
    ``encoder_backend`` (default: the index's; another must have the same fingerprint). Prints
    ``isorag serve: listening on http://HOST:PORT ...`` to stderr once the model is loaded."""
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    sock = bind(host, port)  # before torch, FastAPI and the index are even imported: a taken port fails at once
    try:
        settings = exposed(settings, host, sock.getsockname()[0])
        import torch
        import uvicorn
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        from isorag_pyg.index import ISORAGIndex
        from isorag_pyg.server.app import create_app
        from isorag_pyg.server.memory import pin_mmap_threshold
        from isorag_pyg.server.protocol import guarded_protocol

        settings = fit_to_fd_limit(settings)
        pin_mmap_threshold()  # large batch buffers go back to the system when freed: RSS stays flat
        if threads is not None:
            torch.set_num_threads(threads)
        index = ISORAGIndex.load(index_dir, verify=verify)
        if encoder_backend is not None:
            from isorag_pyg.encoders.spec import encoder_from_spec

            index.encoder = encoder_from_spec(index.encoder_spec, encoder_backend, cache_dir=None, show_progress=False)
        app = create_app(index, settings, verify=verify)
        del index  # a reload frees this version: only the app's ServedIndex holds it
        served = app.state.served
        served.engine.warm_up()
        sock.listen(BACKLOG)  # from here on, connections wait for uvicorn instead of being refused
        bound_host, bound_port = sock.getsockname()[:2]
        url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
        batching = (f"micro-batching: window {settings.batch_window_ms:g} ms, max {settings.max_batch} questions"
                    if settings.batching else "micro-batching off")
        print(f"isorag serve: listening on http://{url_host}:{bound_port} ({len(served.index)} passages, version {served.version}; "
              f"{batching}; {torch.get_num_threads()} torch threads; encoder backend {getattr(served.index.encoder, 'backend', 'torch')})",
              file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", backlog=BACKLOG,
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, timeout_keep_alive=KEEP_ALIVE_S,
                                http=guarded_protocol(AutoHTTPProtocol, settings.read_timeout_s, app.state.gate))
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
