"""Batched retrieval with the queries sharded over Lightning's DDP ranks.

Every rank answers its own share of the queries (Lightning's unrepeated distributed sampler for
prediction: no query is padded in twice), then the rankings are gathered so that every rank holds
the full result in question order and the metrics are those of a single process.
"""
from __future__ import annotations

import math

import lightning as L
import torch
import torch.distributed as dist
from torch import Tensor
from torch.utils.data import DataLoader

from isorag_pyg.evaluation.compare import time_retrieval
from isorag_pyg.retrieval.types import Queries, RetrievalResult, Retriever


class ShardedRetrieval(L.LightningModule):
    """Runs ``retriever`` on the query rows a rank's dataloader hands it; see :func:`sharded_retrieve`."""

    def __init__(self, retriever: Retriever, queries: Queries, k: int):
        super().__init__()
        self.retriever, self.queries, self.k = retriever, queries, k
        self.parts: list[tuple[Tensor, RetrievalResult]] = []
        self.seconds = 0.0

    def on_predict_epoch_start(self) -> None:
        self.parts, self.seconds = [], 0.0

    def predict_step(self, rows: Tensor, batch_idx: int) -> Tensor:
        rows = rows.cpu()
        part = Queries([self.queries.texts[i] for i in rows.tolist()], self.queries.embeddings[rows])
        result, seconds = time_retrieval(self.retriever, part, self.k)
        self.seconds += seconds
        self.parts.append((rows, result))
        return result.indices

    def gathered(self) -> tuple[RetrievalResult, float]:
        """The full result in query order and the slowest rank's retrieval time (seconds)."""
        local = (self.parts, self.seconds)
        shards = [local]
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            shards = [None] * dist.get_world_size()
            dist.all_gather_object(shards, local)
        parts = [part for rank_parts, _ in shards for part in rank_parts]
        rows = torch.cat([r for r, _ in parts])
        if not torch.equal(rows.sort().values, torch.arange(len(self.queries))):
            raise RuntimeError("sharded retrieval did not answer every query exactly once")
        merged = RetrievalResult.concat([res for _, res in parts])
        order = torch.argsort(rows)
        result = RetrievalResult(merged.indices[order], merged.scores[order], merged.stats)
        return result, max(seconds for _, seconds in shards)


def sharded_retrieve(
    retriever: Retriever, queries: Queries, k: int, devices: int, accelerator: str = "cpu", strategy: str = "ddp",
) -> tuple[RetrievalResult, float]:
    """Answer ``queries`` on ``devices`` DDP ranks (on CPU over gloo); returns, on every rank, the
    full result in query order and the wall time of the slowest rank.

    With ``strategy="ddp"`` Lightning starts the other ranks by running the calling script again,
    so the script must reach this call on every rank (the ``evaluate`` app does).
    """
    trainer = L.Trainer(accelerator=accelerator, devices=devices, strategy=strategy, logger=False,
                        enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
    module = ShardedRetrieval(retriever, queries, k)
    batch = math.ceil(len(queries) / devices)
    trainer.predict(module, DataLoader(torch.arange(len(queries)), batch_size=batch), return_predictions=False)
    return module.gathered()
