"""``isorag cache info|clear``: the embedding cache's folder, size and limit; emptying it."""
from __future__ import annotations

import argparse


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size < 1e9 else f"{size / 1e9:.2f} GB"


def run_cache(args: argparse.Namespace) -> list[str]:
    """``info``: the folder, its cached embeddings and their limit, and the folder's other parts;
    ``clear``: every cached embedding removed (the other parts stay)."""
    from isorag_pyg.encoders.cache_files import cache_limit, clear, default_cache_dir, usage

    directory = default_cache_dir()
    if args.action == "clear":
        files, size = clear(directory) if directory.is_dir() else (0, 0)
        return [f"{directory}: removed {files} cached embedding file(s), {_size(size)}"]
    files, size = usage(directory) if directory.is_dir() else (0, 0)
    lines = [f"cache folder: {directory} ($ISORAG_CACHE_DIR)",
             (f"embeddings: {files} file(s), {_size(size)}; limit {_size(cache_limit())} ($ISORAG_CACHE_MAX_BYTES), "
             "the least recently used removed first")]
    for part in sorted(p for p in directory.iterdir() if p.is_dir()) if directory.is_dir() else []:
        lines.append(f"{part.name}/: {_size(sum(f.stat().st_size for f in part.rglob('*') if f.is_file()))} (not cleared by 'isorag cache clear')")
    return lines
