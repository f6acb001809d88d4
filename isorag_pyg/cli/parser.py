"""The ``isorag`` command line's arguments (argparse), light to import: no torch until a command runs."""
from __future__ import annotations

import argparse

ENCODER_BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-bf16")  #: a copy of encoders.backends.BACKENDS (tested equal)
RETRIEVER_NAMES = ("iso", "iso_uniform", "iso_shuffled", "iso_random", "dense", "bm25", "ppr", "hipporag")  #: the built-in retrievers (tested equal)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line and exit status 1, like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``isorag`` command line: one subcommand per job, each with its options and defaults."""
    from isorag_pyg import defaults
    from isorag_pyg.knobs import PhiSpec  # light: dataclasses only
    from isorag_pyg.server.settings import ServerSettings
    from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

    epochs, seed = DEFAULT_TRAINER["max_epochs"], FThetaConfig.seed
    parser = _Parser(prog="isorag", description="ISO-RAG: graph retrieval with isoperimetric noise control.")
    output = argparse.ArgumentParser(add_help=False)  # every command's
    talk = output.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true", help="no progress, errors only")
    talk.add_argument("-v", "--verbose", action="store_true", help="also the library's INFO logs (e.g. which encoder answers, and why)")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, description: str, *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=description, parents=[output, *parents])

    build = command("index", "build an index of a corpus and save it")
    build.add_argument("corpus", help="a .jsonl/.json/.csv file of passages, a dataset file, or a .txt/.md document or folder of them")
    build.add_argument("out_dir", help="where to save the index (an existing index there is replaced atomically)")
    build.add_argument("--graph", default="auto", help="graph builders, '+'-separated: title_mention, entity_graph, adjacent, knn, ... "
                       "(default: auto, chosen by what the corpus supports)")
    build.add_argument("--encoder", default=None, help="sentence-transformers name or path (default: the bundled all-MiniLM-L6-v2)")
    build.add_argument("--epochs", type=int, default=epochs, help=f"f_θ training epochs (default: {epochs})")
    build.add_argument("--p", type=float, default=PhiSpec.p,
                       help=f"φ's volume exponent: 0 counts nodes and needs no f_θ, > 0 trains f_θ for hyperbolic volumes (default: {PhiSpec.p:g})")
    build.add_argument("--shell-floor", type=float, default=PhiSpec.shell_floor, help=f"φ's shell floor (default: {PhiSpec.shell_floor:g})")
    build.add_argument("--max-tokens", type=int, default=defaults.MAX_TOKENS,
                       help=f"tokens per passage when splitting documents (default: {defaults.MAX_TOKENS})")
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
    build.add_argument("--ray-workers", type=int, default=defaults.RAY_WORKERS,
                       help=f"encoder actors with --ray, one per GPU or CPU worker (default: {defaults.RAY_WORKERS})")
    build.add_argument("--ray-cpus", type=float, default=defaults.RAY_CPUS_PER_WORKER,
                       help=f"CPUs per encoder actor with --ray (default: {defaults.RAY_CPUS_PER_WORKER:g})")
    build.add_argument("--ray-gpus", type=float, default=defaults.RAY_GPUS_PER_WORKER,
                       help=f"GPUs per encoder actor with --ray (default: {defaults.RAY_GPUS_PER_WORKER:g})")
    build.add_argument("--seed", type=int, default=seed, help=f"f_θ's training seed (default: {seed})")

    query = command("query", "retrieve passages for questions")
    query.add_argument("index_dir")
    query.add_argument("questions", nargs="+", help="one or more questions")
    query.add_argument("-k", type=int, default=defaults.K, help=f"passages per question (default: {defaults.K})")
    query.add_argument("--retriever", default=defaults.RETRIEVER, help=f"{', '.join(RETRIEVER_NAMES)} (default: {defaults.RETRIEVER})")
    query.add_argument("--json", action="store_true", help="one JSON object per question: {question, results: [{id, title, text, score}]}")
    query.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")
    query.add_argument("--timings", action="store_true", help="print seconds spent on imports, loading, model and retrieval to stderr (JSON)")
    query.add_argument("--threads", type=int, default=1,
                       help="torch threads for retrieval (default: 1: a command's few questions gain nothing from a thread pool, which a busy machine slows)")
    query.add_argument("--server", default=None, metavar="URL",
                       help="ask a running `isorag serve` of this index (e.g. http://127.0.0.1:8000) instead of loading it: no model load")

    llm = argparse.ArgumentParser(add_help=False)  # the reader of ask and serve
    llm.add_argument("--llm", choices=["gguf", "none"], default=None,
                     help="none: no reader (serve: retrieval only); gguf: the packaged Gemma 3 270M through llama.cpp (the default when installed)")
    llm.add_argument("--llm-base-url", default=None, metavar="URL", help="an OpenAI-compatible reader (llama.cpp server, vLLM, Ollama, OpenAI), "
                     "e.g. http://127.0.0.1:8080/v1")
    llm.add_argument("--llm-model", default=None, metavar="NAME", help="the reader's model name at --llm-base-url")
    llm.add_argument("--llm-api-key-env", default=None, metavar="NAME", help="the variable holding the reader's API key (default: OPENAI_API_KEY)")
    llm.add_argument("--llm-timeout", type=float, default=defaults.READER_TIMEOUT_S, metavar="SECONDS",
                     help=f"seconds the reader may stay silent before the answer fails (default: {defaults.READER_TIMEOUT_S:g})")

    ask = command("ask", "answer a question from an index, with numbered citations of its passages", llm)
    ask.add_argument("index_dir")
    ask.add_argument("question")
    ask.add_argument("-k", type=int, default=defaults.K, help=f"passages given to the reader (default: {defaults.K})")
    ask.add_argument("--retriever", default=defaults.RETRIEVER, help=f"{', '.join(RETRIEVER_NAMES)} (default: {defaults.RETRIEVER})")
    ask.add_argument("--json", action="store_true", help="print {question, answer, citations, passages, timings} as JSON")
    ask.add_argument("--no-stream", action="store_true", help="print the answer once it is complete")
    ask.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")
    ask.add_argument("--server", default=None, metavar="URL", help="ask a running `isorag serve` of this index (its reader answers)")

    add = command("add", "add the passages of a corpus to an index (saved atomically)")
    add.add_argument("index_dir")
    add.add_argument("corpus", help="passages to add, in any format `isorag index` reads")
    add.add_argument("--refit", action="store_true", help="train f_θ again on the updated graph (default: keep f_θ)")
    add.add_argument("--epochs", type=int, default=epochs, help=f"f_θ training epochs with --refit (default: {epochs})")
    add.add_argument("--seed", type=int, default=seed, help=f"f_θ's training seed with --refit (default: {seed})")
    add.add_argument("--max-tokens", type=int, default=None,
                       help=f"tokens per passage when splitting documents (default: the index's own, else {defaults.MAX_TOKENS})")

    add.add_argument("--quarantine", action="store_true",
                     help="quarantine the added passages that rank among the strongest bridges (default: report them; the walk leaves them out either way)")

    remove = command("remove", "remove passages from an index by id (saved atomically)")
    remove.add_argument("index_dir")
    remove.add_argument("ids", nargs="+", help="passage ids")

    tune = command("tune", "tune ISO-RAG's knobs on questions with gold passages; store them if they win held out")
    tune.add_argument("index_dir")
    tune.add_argument("questions", help="JSON/JSONL of {question, gold_ids}, or any dataset question file (gold matched by title/text)")
    tune.add_argument("--grid", nargs="+", default=None, metavar="KNOB=V1,V2", help="the search grid (default: beta, alpha, hops)")
    tune.add_argument("--folds", type=int, default=defaults.TUNE_FOLDS, help=f"cross-validation folds (default: {defaults.TUNE_FOLDS})")
    tune.add_argument("-k", type=int, default=defaults.K, help=f"the Recall@k the grid is scored by (default: {defaults.K})")
    tune.add_argument("--dry-run", action="store_true", help="report, but do not store the knobs")
    quarantine = command("quarantine", "keep passages out of the walk until released; list the strongest bridges")
    quarantine.add_argument("index_dir")
    quarantine.add_argument("ids", nargs="*", help="passage ids to quarantine (none: only list)")
    quarantine.add_argument("--release", action="store_true", help="release the ids instead")
    quarantine.add_argument("--top", type=int, default=10, help="strongest bridges listed (default: 10)")
    for writer in (build, add, remove, tune, quarantine):
        writer.add_argument("--lock-timeout", type=float, default=defaults.LOCK_TIMEOUT_S,
                            help=f"seconds to wait for another writer of the index to finish (default: {defaults.LOCK_TIMEOUT_S:g})")

    info = command("info", "show an index's manifest and graph statistics")
    info.add_argument("index_dir")
    info.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")

    cache = command("cache", "the embedding cache: its folder, size and limit (info), or empty it (clear)")
    cache.add_argument("action", choices=["info", "clear"])

    limits = ServerSettings()
    serve = command("serve", "serve an index over HTTP (POST /retrieve, POST /answer, an OpenAI-compatible /v1/chat/completions, "
                    "GET /health, GET /info)", llm)
    serve.add_argument("index_dir")
    serve.add_argument("--host", default=defaults.HOST, help=f"address to listen on (default: {defaults.HOST}, this machine only)")
    serve.add_argument("--port", type=int, default=defaults.PORT, help=f"TCP port 1-65535; 0 picks a free one (default: {defaults.PORT})")
    serve.add_argument("--batch-window-ms", type=float, default=None,
                       help=f"how long a request waits for others to share its batch (default: {limits.batch_window_ms:g})")
    serve.add_argument("--max-batch", type=int, default=None, help=f"questions per batched call (default: {limits.max_batch})")
    serve.add_argument("--no-batching", action="store_true", help="answer every request on its own (--max-batch 1 --batch-window-ms 0)")
    serve.add_argument("--max-questions", type=int, default=limits.max_questions,
                       help=f"questions per request (default: {limits.max_questions})")
    serve.add_argument("--max-k", type=int, default=limits.max_k, help=f"largest k a request may ask for (default: {limits.max_k})")
    serve.add_argument("--max-question-chars", type=int, default=limits.max_question_chars,
                       help=f"characters per question (default: {limits.max_question_chars})")
    serve.add_argument("--max-body-bytes", type=int, default=limits.max_body_bytes,
                       help=f"request body size (default: {limits.max_body_bytes})")
    serve.add_argument("--max-pending", type=int, default=limits.max_pending,
                       help=f"queued questions beyond which requests get 503 (default: {limits.max_pending})")
    serve.add_argument("--threads", type=int, default=None, help="torch threads for encoding and retrieval (default: one per core)")
    serve.add_argument("--encoder-backend", default=None, choices=ENCODER_BACKENDS,
                       help="embed questions on another backend with the same fingerprint (torch, onnx, openvino, openvino-bf16) "
                            "(default: the index's)")
    serve.add_argument("--query-cache", type=int, default=limits.query_cache,
                       help=f"question embeddings kept in an LRU cache; 0 turns it off (default: {limits.query_cache})")
    serve.add_argument("--no-verify", action="store_true", help="skip the checksums of a large trusted index")
    serve.add_argument("--read-timeout", type=float, default=limits.read_timeout_s,
                       help="seconds a connection has, from its accept or its previous answer, to send a whole request; slower or idle "
                            f"ones are closed (default: {limits.read_timeout_s:g})")
    serve.add_argument("--max-connections", type=int, default=limits.max_connections,
                       help="open connections; one more closes the oldest one still waiting for its request, or gets 503 when all are busy "
                            f"(default: {limits.max_connections})")
    serve.add_argument("--max-connections-per-client", type=int, default=limits.max_connections_per_client,
                       help="connections waiting for their request one client address may hold; one more closes its oldest "
                            f"(default: {limits.max_connections_per_client})")
    serve.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every endpoint but /health "
                       "(default: $ISORAG_API_KEY, else none; the variable keeps the key out of the process list)")
    serve.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                       help=f"also answer requests whose Host header names NAME ('*': any); repeatable (default: {', '.join(limits.allowed_hosts)}, "
                            "and the --host address when it is a specific one)")
    serve.add_argument("--watch-seconds", type=float, default=None,
                       help="check the index's manifest this often and serve a newly saved version (default: only on POST /reload)")
    return parser
