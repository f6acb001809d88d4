"""The ``isorag`` command: build, inspect, update, tune, query and serve an index of your own
corpus (``isorag index|query|info|add|remove|tune|serve``; ``isorag <command> --help`` gives the
options).

Errors (a bad path, an empty corpus, a missing or corrupt index, a bad argument such as ``-k abc``)
are one line on stderr and exit status 1; ``ISORAG_DEBUG=1`` shows the traceback instead.
``add``, ``remove`` and ``tune`` hold the index's writer lock from loading to saving, so
concurrent updates run one after the other.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

_START = time.perf_counter()
ENCODER_BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-bf16")  #: a copy of encoders.backends.BACKENDS (tested equal)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line and exit status 1, like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(1, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from isorag_pyg.datasets.corpus_files import DEFAULT_MAX_TOKENS  # light: no torch
    from isorag_pyg.index.locking import DEFAULT_LOCK_TIMEOUT_S
    from isorag_pyg.knobs import PhiSpec  # light: dataclasses only
    from isorag_pyg.server.settings import ServerSettings
    from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

    epochs, seed = DEFAULT_TRAINER["max_epochs"], FThetaConfig.seed
    parser = _Parser(prog="isorag", description="ISO-RAG: graph retrieval with isoperimetric noise control.")
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("index", help="build an index of a corpus and save it")
    build.add_argument("corpus", help="a .jsonl/.json/.csv file of passages, a dataset file, or a .txt/.md document or folder of them")
    build.add_argument("out_dir", help="where to save the index (an existing index there is replaced atomically)")
    build.add_argument("--graph", default="auto", help="graph builders, '+'-separated: title_mention, entity_graph, adjacent, knn, ... "
                       "(default: auto, chosen by what the corpus supports)")
    build.add_argument("--encoder", default=None, help="sentence-transformers name or path (default: the bundled all-MiniLM-L6-v2)")
    build.add_argument("--epochs", type=int, default=epochs, help=f"f_θ training epochs (default: {epochs})")
    build.add_argument("--p", type=float, default=PhiSpec.p,
                       help=f"φ's volume exponent: 0 counts nodes and needs no f_θ, > 0 trains f_θ for hyperbolic volumes (default: {PhiSpec.p:g})")
    build.add_argument("--shell-floor", type=float, default=PhiSpec.shell_floor, help=f"φ's shell floor (default: {PhiSpec.shell_floor:g})")
    build.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                       help=f"tokens per passage when splitting documents (default: {DEFAULT_MAX_TOKENS})")
    build.add_argument("--ann", choices=["exact", "hnsw", "ivf"], default="exact",
                       help="dense candidates: scan every passage, or a FAISS hnsw / ivf index at its default parameters (default: exact)")
    build.add_argument("--encoder-backend", default="torch", choices=[*ENCODER_BACKENDS, "openai"],
                       help="how passages and questions are embedded: sentence-transformers on torch, ONNX Runtime fp32 or int8, OpenVINO fp32 or bf16, "
                            "or an OpenAI-compatible server (--encoder names its model; OPENAI_BASE_URL, OPENAI_API_KEY) (default: torch)")
    build.add_argument("--pool-tokens", action="store_true", help="with --encoder-backend openai: average the per-token vectors of a "
                       "server that does not pool them (llama-cpp-python's over a GGUF without a pooling type)")
    build.add_argument("--encode-devices", nargs="+", default=None, metavar="DEVICE",
                       help="encode in one process per device, e.g. cuda:0 cuda:1, or cpu cpu cpu cpu (default: one process)")
    build.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                       help="encode on Ray actors: alone, a Ray instance on this machine; or a cluster (auto, ray://head:10001)")
    build.add_argument("--ray-workers", type=int, default=2, help="encoder actors with --ray, one per GPU or CPU worker (default: 2)")
    build.add_argument("--ray-cpus", type=float, default=1.0, help="CPUs per encoder actor with --ray (default: 1)")
    build.add_argument("--ray-gpus", type=float, default=0.0, help="GPUs per encoder actor with --ray (default: 0)")
    build.add_argument("--seed", type=int, default=seed, help=f"f_θ's training seed (default: {seed})")
    build.add_argument("--quiet", action="store_true", help="no progress bars")

    query = commands.add_parser("query", help="retrieve passages for questions")
    query.add_argument("index_dir")
    query.add_argument("questions", nargs="+", help="one or more questions")
    query.add_argument("-k", type=int, default=5, help="passages per question (default: 5)")
    query.add_argument("--retriever", default="iso", help="iso, iso_uniform, iso_shuffled, iso_random, dense, bm25, ppr (default: iso)")
    query.add_argument("--json", action="store_true", help="one JSON object per question: {question, results: [{id, title, text, score}]}")
    query.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")
    query.add_argument("--timings", action="store_true", help="print seconds spent on imports, loading, model and retrieval to stderr (JSON)")

    add = commands.add_parser("add", help="add the passages of a corpus to an index (saved atomically)")
    add.add_argument("index_dir")
    add.add_argument("corpus", help="passages to add, in any format `isorag index` reads")
    add.add_argument("--refit", action="store_true", help="train f_θ again on the updated graph (default: keep f_θ)")
    add.add_argument("--epochs", type=int, default=epochs, help=f"f_θ training epochs with --refit (default: {epochs})")
    add.add_argument("--seed", type=int, default=seed, help=f"f_θ's training seed with --refit (default: {seed})")
    add.add_argument("--max-tokens", type=int, default=None,
                       help=f"tokens per passage when splitting documents (default: the index's own, else {DEFAULT_MAX_TOKENS})")

    remove = commands.add_parser("remove", help="remove passages from an index by id (saved atomically)")
    remove.add_argument("index_dir")
    remove.add_argument("ids", nargs="+", help="passage ids")

    tune = commands.add_parser("tune", help="tune ISO-RAG's knobs on questions with gold passages; store them if they win held out")
    tune.add_argument("index_dir")
    tune.add_argument("questions", help="JSON/JSONL of {question, gold_ids}, or any dataset question file (gold matched by title/text)")
    tune.add_argument("--grid", nargs="+", default=None, metavar="KNOB=V1,V2", help="the search grid (default: beta, alpha, hops)")
    tune.add_argument("--folds", type=int, default=2, help="cross-validation folds (default: 2)")
    tune.add_argument("--dry-run", action="store_true", help="report, but do not store the knobs")
    for writer in (build, add, remove, tune):
        writer.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT_S,
                            help=f"seconds to wait for another writer of the index to finish (default: {DEFAULT_LOCK_TIMEOUT_S:g})")

    info = commands.add_parser("info", help="show an index's manifest and graph statistics")
    info.add_argument("index_dir")
    info.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")

    defaults = ServerSettings()
    serve = commands.add_parser("serve", help="serve an index over HTTP (POST /retrieve, GET /health, GET /info)")
    serve.add_argument("index_dir")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port 1-65535; 0 picks a free one (default: 8000)")
    serve.add_argument("--batch-window-ms", type=float, default=defaults.batch_window_ms,
                       help=f"how long a request waits for others to share its batch (default: {defaults.batch_window_ms:g})")
    serve.add_argument("--max-batch", type=int, default=defaults.max_batch, help=f"questions per batched call (default: {defaults.max_batch})")
    serve.add_argument("--no-batching", action="store_true", help="answer every request on its own (--max-batch 1 --batch-window-ms 0)")
    serve.add_argument("--max-questions", type=int, default=defaults.max_questions,
                       help=f"questions per request (default: {defaults.max_questions})")
    serve.add_argument("--max-k", type=int, default=defaults.max_k, help=f"largest k a request may ask for (default: {defaults.max_k})")
    serve.add_argument("--max-question-chars", type=int, default=defaults.max_question_chars,
                       help=f"characters per question (default: {defaults.max_question_chars})")
    serve.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes,
                       help=f"request body size (default: {defaults.max_body_bytes})")
    serve.add_argument("--max-pending", type=int, default=defaults.max_pending,
                       help=f"queued questions beyond which requests get 503 (default: {defaults.max_pending})")
    serve.add_argument("--threads", type=int, default=None, help="torch threads for encoding and retrieval (default: one per core)")
    serve.add_argument("--encoder-backend", default=None, choices=ENCODER_BACKENDS,
                       help="embed questions on another backend with the same fingerprint (torch, onnx, openvino, openvino-bf16) "
                            "(default: the index's)")
    serve.add_argument("--query-cache", type=int, default=defaults.query_cache,
                       help=f"question embeddings kept in an LRU cache; 0 turns it off (default: {defaults.query_cache})")
    serve.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")
    serve.add_argument("--read-timeout", type=float, default=defaults.read_timeout_s,
                       help=f"seconds a client has to send its whole request; slower connections are closed (default: {defaults.read_timeout_s:g})")
    serve.add_argument("--max-connections", type=int, default=defaults.max_connections,
                       help=f"open connections beyond which requests get 503 (default: {defaults.max_connections})")
    serve.add_argument("--watch-seconds", type=float, default=None,
                       help="check the index's manifest this often and serve a newly saved version (default: only on POST /reload)")
    return parser


def _index(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.encoders.sentence import DEFAULT_ENCODER
    from isorag_pyg.encoders.spec import build_encoder
    from isorag_pyg.graph.auto import describe_graph
    from isorag_pyg.index import ISORAGIndex
    from isorag_pyg.knobs import PhiSpec

    if args.encoder_backend == "openai" and not args.encoder:
        raise ValueError("--encoder-backend openai needs --encoder MODEL: the model name the server embeds with")
    if args.ray is not None and args.encode_devices:
        raise ValueError("--ray and --encode-devices are two ways to spread the encoding: choose one")
    if args.ray is not None and (args.encoder_backend != "torch" or args.pool_tokens):
        raise ValueError("--ray encodes with the torch backend: drop --encoder-backend and --pool-tokens")
    tokenizer = None if args.encoder_backend == "openai" else args.encoder or DEFAULT_ENCODER  # a server's tokenizer is not here: count words
    passages = ISORAGIndex.read_corpus(args.corpus, args.max_tokens, encoder=tokenizer)
    if args.ray is not None:
        from isorag_pyg.scale import RayEncoder

        encoder = RayEncoder(args.encoder or DEFAULT_ENCODER, address=None if args.ray == "local" else args.ray, workers=args.ray_workers,
                             cpus_per_worker=args.ray_cpus, gpus_per_worker=args.ray_gpus)
    else:
        encoder = build_encoder(args.encoder or DEFAULT_ENCODER, args.encoder_backend, show_progress=not args.quiet, devices=args.encode_devices,
                                pool_tokens=args.pool_tokens)
    phi = PhiSpec(p=args.p, shell_floor=args.shell_floor)
    f_theta = _f_theta_config(args.epochs, args.seed, args.quiet) if phi.needs_coordinates else None
    graph = None if args.graph == "auto" else {name: {} for name in args.graph.split("+") if name}
    index = ISORAGIndex.build(passages, encoder=encoder, graph=graph, f_theta=f_theta, phi=phi, progress=not args.quiet, ann=args.ann)
    index.max_tokens = args.max_tokens
    index.save(args.out_dir, lock_timeout=args.lock_timeout)
    return [f"{args.out_dir}: {index!r}", *describe_graph(index.statistics)]


def _query(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.index import ISORAGIndex
    from isorag_pyg.index.answers import answer_json

    timings = {"imports_s": time.perf_counter() - _START}
    start = time.perf_counter()
    index = ISORAGIndex.load(args.index_dir, verify=not args.no_verify)
    timings["load_s"] = time.perf_counter() - start
    start = time.perf_counter()
    index.encoder.encode(["warm-up"])  # model load, timed apart from retrieval
    timings["model_s"] = time.perf_counter() - start
    start = time.perf_counter()
    hits = index.retrieve(args.questions, k=args.k, retriever=args.retriever)
    timings["retrieval_s"] = time.perf_counter() - start
    lines = []
    for question, results in zip(args.questions, hits):
        if args.json:
            lines.append(json.dumps(answer_json(question, results), ensure_ascii=False))
            continue
        lines.append(f"Q: {question}")
        for rank, r in enumerate(results, 1):
            text = r.text if len(r.text) <= 160 else r.text[:157] + "..."
            lines.append(f"  {rank}. [{r.score:.3f}] {r.title} ({r.id}): {text}")
    if args.timings:
        timings["total_s"] = time.perf_counter() - _START
        print(json.dumps(timings), file=sys.stderr)
    return lines


def _f_theta_config(epochs: int, seed: int, quiet: bool):
    from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

    if epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {epochs}")
    return FThetaConfig(trainer={**DEFAULT_TRAINER, "max_epochs": epochs, "enable_progress_bar": not quiet, "enable_model_summary": False}, seed=seed)


def _writer_lock(index_dir: str, timeout: float) -> contextlib.AbstractContextManager[None]:
    from isorag_pyg.index.locking import existing_index_lock  # held from loading to saving
    return existing_index_lock(index_dir, timeout)


def _add(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.index import ISORAGIndex

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        tokenizer = None if index.encoder_spec.get("backend") == "openai" else index.encoder_spec["name"]
        max_tokens = index.max_tokens if args.max_tokens is None else args.max_tokens
        passages = ISORAGIndex.read_corpus(args.corpus, max_tokens, encoder=tokenizer, id_offset=index.next_id)
        report = index.add(passages, refit=_f_theta_config(args.epochs, args.seed, quiet=True) if args.refit else None)
        index.save(args.index_dir)
    return [f"{args.index_dir}: {report.summary()}; {len(index)} passages (version {index.generation})"]


def _remove(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.index import ISORAGIndex

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        report = index.remove(args.ids)
        index.save(args.index_dir)
    return [f"{args.index_dir}: {report.summary()}; {len(index)} passages (version {index.generation})"]


def _tune(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.index import ISORAGIndex
    from isorag_pyg.index.tuning import DEFAULT_GRID, parse_grid, read_questions, tune

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        questions, gold = read_questions(args.questions, index)
        result = tune(index, questions, gold, parse_grid(args.grid) if args.grid else DEFAULT_GRID, folds=args.folds, store=not args.dry_run)
        if result.stored:
            index.save(args.index_dir)
    return [f"{args.index_dir}: {result.summary()}"]


def _info(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.graph.auto import describe_graph
    from isorag_pyg.index import ISORAGIndex

    info: dict[str, Any] = ISORAGIndex.load(args.index_dir, verify=not args.no_verify).info()
    for line in describe_graph(info["graph"]["statistics"]):  # in words, beside the manifest on stdout
        print(line, file=sys.stderr)
    return [json.dumps(info, indent=2, ensure_ascii=False)]


def _serve(args: argparse.Namespace) -> list[str]:
    from isorag_pyg.server.runner import serve  # light until the address is bound
    from isorag_pyg.server.settings import ServerSettings

    limits = {"max_questions": args.max_questions, "max_k": args.max_k, "max_question_chars": args.max_question_chars,
              "max_body_bytes": args.max_body_bytes, "max_pending": args.max_pending, "query_cache": args.query_cache,
              "watch_seconds": args.watch_seconds, "read_timeout_s": args.read_timeout, "max_connections": args.max_connections}
    if args.no_batching:
        settings = ServerSettings.unbatched(**limits)
    else:
        settings = ServerSettings(batch_window_ms=args.batch_window_ms, max_batch=args.max_batch, **limits)
    serve(args.index_dir, args.host, args.port, settings, verify=not args.no_verify, threads=args.threads, encoder_backend=args.encoder_backend)
    return []


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = sys.stdout
    try:
        # libraries print notices to stdout (e.g. transformers under WANDB_MODE=offline): send
        # them to stderr, so stdout carries only the answer (and --json stays parseable)
        with contextlib.redirect_stdout(sys.stderr):
            commands = {"index": _index, "query": _query, "info": _info, "add": _add, "remove": _remove, "tune": _tune, "serve": _serve}
            lines = commands[args.command](args)
        out.write("".join(f"{line}\n" for line in lines))
    except KeyboardInterrupt:
        print("isorag: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one line for the user; the traceback only when asked for
        if os.environ.get("ISORAG_DEBUG"):
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"isorag {args.command}: error: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
