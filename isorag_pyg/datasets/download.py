"""Opt-in download of the standard HippoRAG benchmark files from the Hugging Face hub.

Nothing here runs unless a user asks for it (``dataset.download=true``); the offline path
never touches the network.
"""
from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

HIPPORAG_REPO = "osunlp/HippoRAG_2"


def download_hipporag_files(name: str, dest_dir: str | Path, repo_id: str = HIPPORAG_REPO) -> tuple[Path, Path]:
    """Fetch ``<name>.json`` and ``<name>_corpus.json`` into ``dest_dir``; returns both paths."""
    from huggingface_hub import hf_hub_download

    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for filename in (f"{name}.json", f"{name}_corpus.json"):
        log.info("downloading %s from the %s dataset on the Hugging Face hub", filename, repo_id)
        paths.append(Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset", local_dir=dest_dir)))
    return paths[0], paths[1]
