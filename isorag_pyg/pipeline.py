"""From a hydra config to the pieces every entry point needs: questions, corpus, embeddings, graph."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf
from torch_geometric.data import Data

from isorag_pyg.datasets import QADataset, generate_synthetic_dataset, load_qa_dataset
from isorag_pyg.datasets.download import download_hipporag_files
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.graph import build_corpus_graph, graph_statistics, run_builders

log = logging.getLogger(__name__)


@dataclass
class CorpusBundle:
    """Evaluation questions with their corpus, optional training questions, embeddings and graph."""

    eval: QADataset
    train: QADataset | None
    graph: Data
    stats: dict[str, Any]

    @property
    def leak(self) -> bool:
        return bool(self.graph.leak)


def _resolve(data_dir: str | Path, relative: str | None) -> Path | None:
    return None if relative is None else Path(data_dir).expanduser() / relative


def load_dataset_splits(cfg: DictConfig) -> tuple[QADataset, QADataset | None]:
    """Load (evaluation, training) datasets named by a ``conf/dataset`` config."""
    if cfg.source == "synthetic":
        params = OmegaConf.to_container(cfg.generator, resolve=True)
        return generate_synthetic_dataset(split="dev", **params), generate_synthetic_dataset(split="train", **params)
    if cfg.source != "files":
        raise ValueError(f"dataset.source must be 'synthetic' or 'files', got {cfg.source!r}")
    data_dir = Path(cfg.data_dir).expanduser()
    eval_questions, eval_corpus = _resolve(data_dir, cfg.eval_questions), _resolve(data_dir, cfg.get("eval_corpus"))
    if cfg.get("download", False):
        eval_questions, eval_corpus = download_hipporag_files(cfg.hub_name, data_dir / "hipporag")
    elif not eval_questions.is_file():
        raise FileNotFoundError(
            f"{eval_questions} not found: set dataset.data_dir (or $ISORAG_DATA_DIR) to the folder holding "
            f"{cfg.eval_questions}, or pass dataset.download=true to fetch the HippoRAG files from the hub"
        )
    eval_ds = load_qa_dataset(eval_questions, eval_corpus, name=cfg.name)
    train_ds = None
    if cfg.get("train_questions"):
        train_ds = load_qa_dataset(_resolve(data_dir, cfg.train_questions), _resolve(data_dir, cfg.get("train_corpus")), name=f"{cfg.name}-train")
    return eval_ds, train_ds


def build_encoder(cfg: DictConfig) -> SentenceEncoder:
    return SentenceEncoder(cfg.model, batch_size=cfg.batch_size, device=str(device_of(cfg.get("device"))),
                           cache_dir=cfg.get("cache_dir", "default"), show_progress=cfg.get("show_progress", True))


def train_eval_overlap(eval_ds: QADataset, train_ds: QADataset | None) -> int:
    """How many training questions are also evaluation questions (same id or same text)."""
    if train_ds is None:
        return 0
    ids = {q.id for q in eval_ds.questions}
    texts = {q.text.strip().casefold() for q in eval_ds.questions}
    return sum(q.id in ids or q.text.strip().casefold() in texts for q in train_ds.questions)


def prepare_corpus(cfg: DictConfig) -> CorpusBundle:
    """Load the dataset, embed the corpus (cached) and build the configured passage graph.

    ``cfg.split == "train"`` evaluates the training questions over their own corpus (for tuning
    without touching the dev questions); there are then no other training questions.
    """
    eval_ds, train_ds = load_dataset_splits(cfg.dataset)
    split = cfg.get("split", "dev")
    if split == "train":
        if train_ds is None:
            raise ValueError(f"dataset {cfg.dataset.name} has no training questions for split=train")
        eval_ds, train_ds = train_ds, None
    elif split != "dev":
        raise ValueError(f"split must be 'dev' or 'train', got {split!r}")
    encoder = build_encoder(cfg.encoder)
    x = encoder.encode([p.content for p in eval_ds.corpus])
    spec = OmegaConf.to_container(cfg.graph.builders, resolve=True)
    edges = run_builders(spec, eval_ds.corpus, x, eval_questions=eval_ds, train_questions=train_ds)
    graph = build_corpus_graph(eval_ds.corpus, x, edges)
    overlap = train_eval_overlap(eval_ds, train_ds)
    if overlap and "train_cooccurrence" in spec:
        log.warning("%d training questions are also evaluation questions: train_cooccurrence LEAKS", overlap)
        graph.leak = True
    stats = graph_statistics(graph)
    stats["train_eval_question_overlap"] = overlap
    log.info("corpus graph (%s): %s", "+".join(graph.builders), stats)
    if graph.leak:
        log.warning("LEAK: this graph is built from the evaluated questions' own contexts; metrics are not held-out results")
    return CorpusBundle(eval_ds, train_ds, graph, stats)


def device_of(name: str | None) -> torch.device:
    """``"auto"``/``None`` -> this process's GPU when CUDA is available (``cuda:LOCAL_RANK``, so the
    DDP ranks of one machine each take their own), else the CPU; any other name as given."""
    if name in (None, "auto"):
        if not torch.cuda.is_available():
            return torch.device("cpu")
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    return torch.device(name)


def process_rank() -> int:
    """This process's global rank: 0 except in the extra processes of a DDP run."""
    return rank_zero_only.rank
