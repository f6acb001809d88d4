"""ISO-RAG's ranking fused with a lexical retriever's (the knob ``lexical_weight``)."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from isorag_pyg.retrieval.types import RetrievalResult
from isorag_pyg.utils.rank_fusion import minmax_union

#: ``top(score, batch, ptr, node, k)``: a retriever's ranking of flat, per-query grouped scores
#: (positions and scores, ``[Q, k]``), as :meth:`~isorag_pyg.retrieval.ISORetriever.top`.
Ranking = Callable[[Tensor, Tensor, Tensor, Tensor, int], tuple[Tensor, Tensor]]


def hybrid_ranking(walked: RetrievalResult, lexical: RetrievalResult, weight: float, excluded: Tensor, top: Ranking,
                   k: int) -> RetrievalResult:
    """The top ``k`` of the union of ``walked`` (the walk's best ``L``) and ``lexical`` (the lexical
    retriever's best ``L``), by ``minmax(walked) + weight * minmax(lexical)``
    (:func:`~isorag_pyg.utils.rank_fusion.minmax_union`), ranked by ``top``. A lexical entry that
    scores 0 (no word in common) or is ``excluded`` (``[N]`` bool over the corpus rows: quarantined)
    is none; a trace's ``top`` becomes this ranking."""
    rows = lexical.indices
    kept = (lexical.scores > 0) & ~excluded.cpu()[rows.clamp_min(0)]  # padding (-1) stays -1 either way
    node, score, batch, ptr = minmax_union((walked.indices, walked.scores), (torch.where(kept, rows, -1), lexical.scores), weight,
                                           excluded.numel())
    positions, scores = top(score, batch, ptr, node, k)
    ranked = torch.where(positions >= 0, node[positions.clamp_min(0)], -1)
    if walked.traces is not None:
        for trace, best, value in zip(walked.traces, ranked.tolist(), scores.tolist()):
            trace["top"] = list(zip(best, value))
    return RetrievalResult(ranked, scores, walked.stats, walked.traces)
