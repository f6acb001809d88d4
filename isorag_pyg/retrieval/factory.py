"""Build a retriever from its ``conf/retriever`` config."""
from __future__ import annotations

import time
from typing import Callable

import torch
from omegaconf import DictConfig
from torch import Tensor

from isorag_pyg.pipeline import CorpusBundle, device_of
from isorag_pyg.retrieval.baselines import BM25Retriever, DenseRetriever, GlobalPPRRetriever
from isorag_pyg.retrieval.iso_retriever import ISORetriever
from isorag_pyg.retrieval.types import Queries, RetrievalResult, Retriever
from isorag_pyg.utils.isoperimetric import ball_log_profile

KINDS = ("iso", "dense", "bm25", "ppr")


def build_retriever(cfg: DictConfig, bundle: CorpusBundle, ball: Callable[[], tuple[Tensor, float]]) -> Retriever:
    """``ball()`` supplies f_θ's ball coordinates and curvature (called only for ``kind: iso`` with
    ``p > 0``: with ``p = 0`` every volume is 1 and φ needs no coordinates)."""
    kind = cfg.kind
    device = device_of(cfg.get("device"))
    x = bundle.graph.x
    # edge_weights: true -> PPR (global, or ISO-RAG's local one) follows the graph's edge_weight
    edge_weight = bundle.graph.edge_weight if cfg.get("edge_weights", False) else None
    if kind == "dense":
        retriever = DenseRetriever(x, device)
    elif kind == "bm25":
        retriever = BM25Retriever([p.content for p in bundle.eval.corpus])
    elif kind == "ppr":
        retriever = GlobalPPRRetriever(bundle.graph, x, cfg.num_seeds, cfg.alpha, cfg.tau, cfg.lambda_graph, cfg.lambda_dense,
                                       cfg.tol, cfg.max_iter, device, edge_weight=edge_weight)
    elif kind == "iso":
        z, curvature = ball() if cfg.p != 0 else (torch.zeros(bundle.graph.num_nodes, 1), 1.0)
        log_phi = ball_log_profile(bundle.graph.edge_index, z, cfg.p, curvature, cfg.eps, cfg.get("shell_floor", 0.0))
        retriever = ISORetriever(
            bundle.graph, x, log_phi, num_seeds=cfg.num_seeds, over_retrieval=cfg.over_retrieval, hops=cfg.hops,
            max_expansion=cfg.max_expansion, beta=cfg.beta, phi_mode=cfg.phi_mode, alpha=cfg.alpha, tau=cfg.tau,
            lambda_graph=cfg.lambda_graph, lambda_dense=cfg.lambda_dense, tol=cfg.tol, max_iter=cfg.max_iter,
            seed=cfg.get("seed", 0), device=device, edge_weight=edge_weight,
        )
    else:
        raise ValueError(f"unknown retriever kind {kind!r}; choose from {', '.join(KINDS)}")
    retriever.name = cfg.name
    return retriever


def synchronize(device: torch.device | str) -> None:
    """Wait for queued CUDA work so wall-clock timings are honest."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_retrieval(retriever: Retriever, queries: Queries, k: int, device: torch.device | str) -> tuple[RetrievalResult, float]:
    """One untimed warm-up query, then all ``queries`` in one call: the result and its seconds."""
    retriever.retrieve(queries.slice(0, 1), k)
    synchronize(device)
    start = time.perf_counter()
    result = retriever.retrieve(queries, k)
    synchronize(device)
    return result, time.perf_counter() - start
