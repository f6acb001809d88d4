"""``isorag serve``: the HTTP server over a saved index."""
from __future__ import annotations

import argparse
import os


def run_serve(args: argparse.Namespace) -> list[str]:
    """Serve until interrupted; prints nothing on stdout."""
    from isorag_pyg.server.runner import serve  # light until the address is bound
    from isorag_pyg.server.settings import ServerSettings

    limits = {"max_questions": args.max_questions, "max_k": args.max_k, "max_question_chars": args.max_question_chars,
              "max_body_bytes": args.max_body_bytes, "max_pending": args.max_pending, "query_cache": args.query_cache,
              "watch_seconds": args.watch_seconds, "read_timeout_s": args.read_timeout, "max_connections": args.max_connections,
              "max_connections_per_client": args.max_connections_per_client,
              "api_key": args.api_key if args.api_key is not None else os.environ.get("ISORAG_API_KEY") or None,
              "allowed_hosts": (*ServerSettings.allowed_hosts, *args.allowed_host)}
    batching = {knob: value for knob, value in (("batch_window_ms", args.batch_window_ms), ("max_batch", args.max_batch)) if value is not None}
    unbatched = ServerSettings.unbatched(**limits)
    if args.no_batching and any(value != getattr(unbatched, knob) for knob, value in batching.items()):
        raise ValueError(f"--no-batching answers every request on its own (--max-batch {unbatched.max_batch} --batch-window-ms "
                         f"{unbatched.batch_window_ms:g}): drop --max-batch and --batch-window-ms")
    settings = unbatched if args.no_batching else ServerSettings(**batching, **limits)
    serve(args.index_dir, args.host, args.port, settings, verify=not args.no_verify, threads=args.threads, encoder_backend=args.encoder_backend)
    return []
