"""``isorag index``: read a corpus, build its index and save it."""
from __future__ import annotations

import argparse


def run_index(args: argparse.Namespace) -> list[str]:
    """Build the index of ``args.corpus`` and save it; its summary and graph statistics."""
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
    f_theta = f_theta_config(args.epochs, args.seed, args.quiet) if phi.needs_coordinates else None
    graph = None if args.graph == "auto" else {name: {} for name in args.graph.split("+") if name}
    index = ISORAGIndex.build(passages, encoder=encoder, graph=graph, f_theta=f_theta, phi=phi, progress=not args.quiet, ann=args.ann)
    index.max_tokens = args.max_tokens
    index.save(args.out_dir, lock_timeout=args.lock_timeout)
    return [f"{args.out_dir}: {index!r}", *describe_graph(index.statistics)]


def f_theta_config(epochs: int, seed: int, quiet: bool):
    """f_θ's training configuration for ``--epochs`` / ``--seed`` (progress bars unless ``quiet``)."""
    from isorag_pyg.training.config import DEFAULT_TRAINER, FThetaConfig

    if epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {epochs}")
    return FThetaConfig(trainer={**DEFAULT_TRAINER, "max_epochs": epochs, "enable_progress_bar": not quiet, "enable_model_summary": False}, seed=seed)
