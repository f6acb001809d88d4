"""The jobs' index for a dataset: built from the configs, or opened from a directory, or reused
from the cache (so that sweeps build it once)."""
from __future__ import annotations

from pathlib import Path

from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from isorag_pyg.datasets import QADataset
from isorag_pyg.experiments.index_cache import cached_index
from isorag_pyg.index import ISORAGIndex, corpus_hash
from isorag_pyg.jobs import config as conf


def process_rank() -> int:
    """This process's global rank: 0 except in the extra processes of a DDP run."""
    return rank_zero_only.rank


def dataset_index(cfg: DictConfig, eval_ds: QADataset, train_ds: QADataset | None, out_dir: Path, with_f_theta: bool) -> ISORAGIndex:
    """``cfg.index`` (a saved index, checked against the dataset's corpus), else the cached
    index for these configs, else a new one (with f_θ when ``with_f_theta``), cached."""
    if cfg.get("index"):
        index = ISORAGIndex.load(cfg.index)
        if index.corpus_hash != corpus_hash(eval_ds.corpus):
            raise ValueError(f"{cfg.index}: this index was built over another corpus than {eval_ds.name}'s "
                             f"({len(index)} passages against {len(eval_ds.corpus)})")
        return index
    rank = process_rank()  # extra DDP ranks (sharded evaluation) train in a directory of their own
    return cached_index(eval_ds, train_ds, **conf.index_settings(cfg, with_f_theta), cache_dir=conf.index_cache_dir(cfg),
                        work_dir=out_dir / ("f_theta" if rank == 0 else f"f_theta_rank{rank}"), save=rank == 0)
