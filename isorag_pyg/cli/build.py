"""``isorag index``: read a corpus, build its index and save it."""
from __future__ import annotations

import argparse
import importlib
import logging
from typing import Any

log = logging.getLogger(__name__)


def run_index(args: argparse.Namespace) -> list[str]:
    """Build the index of ``args.corpus`` and save it; its summary and graph statistics (its
    warnings are logged by the build, so not repeated here)."""
    from isorag_pyg.store.directory import check_destination

    check_destination(args.out_dir)  # an unwritable destination fails before the corpus is read and embedded
    from isorag_pyg.graph.auto import describe_graph
    from isorag_pyg.index import ISORAGIndex
    from isorag_pyg.index.build import passage_encoder
    from isorag_pyg.index.corpus import corpus_tokenizer
    from isorag_pyg.knobs import PhiSpec

    encoder = passage_encoder(args.encoder, args.encoder_backend, args.encode_devices, args.pool_tokens, args.ray, args.ray_workers,
                              args.ray_cpus, args.ray_gpus, show_progress=not args.quiet)  # incompatible options fail before the corpus is read
    passages = ISORAGIndex.read_corpus(args.corpus, args.max_tokens, encoder=corpus_tokenizer(args.encoder, args.encoder_backend))
    phi = PhiSpec(p=args.p, shell_floor=args.shell_floor)
    f_theta = f_theta_config(args.epochs, args.seed, args.quiet, args.verbose) if phi.needs_coordinates else None
    graph = None if args.graph == "auto" else {name: {} for name in args.graph.split("+") if name}
    index = ISORAGIndex.build(passages, encoder=encoder, graph=graph, f_theta=f_theta, phi=phi, progress=not args.quiet, ann=args.ann,
                              max_tokens=args.max_tokens)
    index.save(args.out_dir, lock_timeout=args.lock_timeout)
    prepare_query_encoder(encoder, show_progress=not args.quiet)
    return [f"{args.out_dir}: {index!r}", *(line for line in describe_graph(index.statistics) if not line.startswith("warning:"))]


def prepare_query_encoder(encoder: Any, show_progress: bool = False) -> None:
    """Export the encoder's model for fast queries (:func:`~isorag_pyg.encoders.exported.prepare_exported_encoder`,
    once per model and machine, when the ``[onnx]`` extra is installed); a failure leaves queries
    to sentence-transformers and is one warning, not a failed command."""
    from isorag_pyg.encoders.exported import prepare_exported_encoder

    try:
        prepare_exported_encoder(encoder, show_progress)
    except Exception as err:  # noqa: BLE001 - the index is saved: an export that fails only costs query speed
        log.warning("questions to this index will go through sentence-transformers: the ONNX export failed (%s)", err)


def f_theta_config(epochs: int, seed: int, quiet: bool, verbose: bool = False):
    """f_θ's training configuration for ``--epochs`` / ``--seed`` (Lightning's bars on a terminal
    unless ``quiet``; elsewhere the index's stage records say when training starts and ends).
    Lightning's INFO lines (accelerators found, a tip to install its logger, why fit stopped), which
    it prints through a handler of its own, only with ``verbose``."""
    from isorag_pyg.progress import interactive
    from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

    if epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {epochs}")
    importlib.import_module("lightning")  # it sets its loggers' levels on import: ours come after
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    return FThetaConfig(trainer={**DEFAULT_TRAINER, "max_epochs": epochs, "enable_progress_bar": not quiet and interactive(),
                                  "enable_model_summary": False}, seed=seed)
