"""``isorag serve``: the HTTP server over a saved index."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isorag_pyg.qa.reader_spec import Reader


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
    serve(args.index_dir, args.host, args.port, settings, verify=not args.no_verify, threads=args.threads, encoder_backend=args.encoder_backend,
          reader=_reader(args))
    return []


def _reader(args: argparse.Namespace) -> Reader | None:
    """The reader the flags name (``--llm none``: none); the packaged one when none is named and it is
    installed, else none (a warning: retrieval only)."""
    from isorag_pyg.qa.reader_spec import ReaderSpec, ReaderUnavailable

    spec = ReaderSpec.from_flags(args.llm, args.llm_base_url, args.llm_model, args.llm_api_key_env, args.llm_timeout)
    if spec.kind == "none":
        return None
    try:
        return spec.make()
    except ReaderUnavailable as err:
        if args.llm is not None:
            raise
        print(f"isorag serve: answering retrieval only: {err}", file=sys.stderr, flush=True)
        return None
