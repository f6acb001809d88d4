"""``isorag add|remove|tune|quarantine``: change a saved index, each holding its writer lock from
loading to saving, so concurrent updates run one after the other."""
from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from isorag_pyg.cli.build import f_theta_config, prepare_query_encoder

if TYPE_CHECKING:
    from isorag_pyg.index.bridges import Bridge


def _writer_lock(index_dir: str, timeout: float) -> contextlib.AbstractContextManager[None]:
    from isorag_pyg.store.locking import existing_index_lock  # held from loading to saving
    return existing_index_lock(index_dir, timeout)


def run_add(args: argparse.Namespace) -> list[str]:
    """Add a corpus's new passages and save the index (not when every passage was already in it)."""
    from isorag_pyg.encoders.spec import encoder_from_spec
    from isorag_pyg.index import ISORAGIndex

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        passages = index.read_additions(args.corpus, args.max_tokens)
        before = set(index.passages.ids)
        report = index.add(passages, refit=f_theta_config(args.epochs, args.seed, True, args.verbose) if args.refit else None)
        new = [i for i in index.passages.ids if i not in before]
        bridges = [b for b in index.bridges(ids=new) if b.left_out] if new else []
        if args.quarantine and bridges:
            index.quarantine([b.id for b in bridges])
        if changed := bool(report.added or args.refit):  # passages already there: no new version
            index.save(args.index_dir)
    if report.added and index.encoder_spec.get("backend", "torch") != "openai":  # a local model embedded them: export it for fast queries
        prepare_query_encoder(encoder_from_spec(index.encoder_spec, show_progress=False), show_progress=not args.quiet)
    lines = [f"{args.index_dir}: {report.summary()}; {len(index)} passages (version {index.generation}{'' if changed else ', unchanged'})"]
    verb = "quarantined" if args.quarantine else "left out of the walk (isorag quarantine keeps them out for good)"
    return lines + [f"  bridge {bridge_line(b)}: {verb}" for b in bridges]


def bridge_line(bridge: Bridge) -> str:
    """One passage of the bridging report in words: id, title, score and what it ties."""
    return f"{bridge.id} ({bridge.title or 'untitled'}, score {bridge.score:.3f}) ties {', '.join(bridge.ties) or 'nothing'}"


def run_quarantine(args: argparse.Namespace) -> list[str]:
    """Quarantine passages (or release them), or list the quarantined and the strongest bridges."""
    from isorag_pyg.index import ISORAGIndex

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        if args.ids:
            index.quarantine(args.ids, release=args.release)
            index.save(args.index_dir)
    bridges = index.bridges(args.top)
    return ([f"{args.index_dir}: {len(index.quarantined)} quarantined: {', '.join(index.quarantined) or 'none'}"]
            + [f"  {'Q' if b.quarantined else '-'}{'L' if b.left_out else '-'} {bridge_line(b)}" for b in bridges])


def run_remove(args: argparse.Namespace) -> list[str]:
    """Remove passages by id and save the index (an unknown id removes nothing)."""
    from isorag_pyg.index import ISORAGIndex

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        report = index.remove(args.ids)
        index.save(args.index_dir)
    return [f"{args.index_dir}: {report.summary()}; {len(index)} passages (version {index.generation})"]


def run_tune(args: argparse.Namespace) -> list[str]:
    """Tune ISO-RAG's knobs on questions; save them when they win held out (not with ``--dry-run``)."""
    from isorag_pyg import defaults
    from isorag_pyg.experiments.tuning import parse_grid, read_questions, tune
    from isorag_pyg.index import ISORAGIndex

    with _writer_lock(args.index_dir, args.lock_timeout):
        index = ISORAGIndex.load(args.index_dir)
        questions, gold = read_questions(args.questions, index)
        result = tune(index, questions, gold, parse_grid(args.grid) if args.grid else defaults.TUNE_GRID, k=args.k, folds=args.folds,
                      store=not args.dry_run)
        if result.stored:
            index.save(args.index_dir)
    return [f"{args.index_dir}: {result.summary()}"]
