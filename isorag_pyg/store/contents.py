"""What an index holds about its corpus, as one immutable record: a build, a load and an update
each make a new one (nothing is patched in place)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from torch import Tensor
from torch_geometric.data import Data

from isorag_pyg.store.passages import PassageStore


@dataclass(frozen=True)
class IndexContents:
    """Passages and everything computed from them.

    Attributes:
        passages: the passages by corpus row.
        embeddings: ``[N, d]`` unit-norm float32 passage embeddings.
        graph: the corpus graph (``edge_index``, ``edge_weight``, ``edge_source``).
        log_phi: ``[N]`` log isoperimetric profile under the index's φ recipe.
        bridging: ``[N]`` how much each node inflates its neighbours' profiles under the same
            recipe (:func:`~isorag_pyg.utils.bridging.bridging_score`): high for a passage that
            alone ties unrelated regions together.
        statistics: the graph's statistics, its builders (in order) and the leak flag
            (:func:`~isorag_pyg.graph.graph_statistics`).
        corpus_hash: identifies the passages (:func:`~isorag_pyg.index.corpus.corpus_hash`).
        z: ``[N, dim]`` f_θ's ball coordinates (``None`` without f_θ).
        knn_edges: the k-NN builder's directed lists, kept for updates (``None`` without it).
    """

    passages: PassageStore
    embeddings: Tensor
    graph: Data
    log_phi: Tensor
    bridging: Tensor
    statistics: dict[str, Any]
    corpus_hash: str
    z: Tensor | None = None
    knn_edges: Tensor | None = None

    def replace(self, **changes: Any) -> IndexContents:
        return dataclasses.replace(self, **changes)
