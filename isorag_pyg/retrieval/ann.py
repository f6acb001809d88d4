"""Approximate nearest-neighbour search over the passage embeddings with FAISS (``faiss-cpu``):
HNSW or IVF with the inner-product metric on unit-norm float32 vectors, so scores are cosines.

The index is serialised to bytes (:func:`faiss.serialize_index`) and kept as a ``uint8`` tensor
in a safetensors file, kind and parameters in its metadata: no pickle.

FAISS is imported where an index is built or read, not with this module: an index without one
(the exact scan, the default) is queried without it.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

if TYPE_CHECKING:
    import faiss

#: ``ann`` choices: the exact scan (no FAISS index) or one of FAISS's approximate indexes.
ANN_KINDS = ("exact", "hnsw", "ivf")
#: Parameters per kind and their defaults (``None``: derived from the corpus size at build time,
#: see :func:`resolve_params`), chosen with the ANN benchmark to keep the recall of ISO-RAG's
#: dense pool (top 50) at or above 0.99 on 2Wiki and on generated corpora of up to 1M passages:
#: HNSW needs ``ef_construction`` 200 (80 left it at 0.93 at 1M), IVF ``nprobe`` 128 (2Wiki's
#: real embeddings spread a query's neighbours over many lists: 32 of 313 found 0.89).
DEFAULT_PARAMS: dict[str, dict[str, int | None]] = {
    "exact": {},
    "hnsw": {"M": 32, "ef_construction": 200, "ef_search": 256},
    "ivf": {"nlist": None, "nprobe": 128, "train_size": None, "seed": 0},
}
#: The search-time parameter of each kind (the others are fixed when the index is built).
SEARCH_PARAM = {"hnsw": "ef_search", "ivf": "nprobe"}


def check_ann(kind: str, params: Mapping[str, Any] | None = None) -> dict[str, int | None]:
    """``params`` over the defaults of ``kind``, checked: a known kind, known names, positive
    integers. Raises ``ValueError`` naming the problem."""
    if kind not in ANN_KINDS:
        raise ValueError(f"unknown ann {kind!r}; choose from {', '.join(ANN_KINDS)}")
    params = dict(params or {})
    allowed = DEFAULT_PARAMS[kind]
    if unknown := sorted(set(params) - set(allowed)):
        takes = f"it takes {', '.join(allowed)}" if allowed else "it takes none"
        raise ValueError(f"unknown ann_params {', '.join(unknown)} for ann={kind!r}; {takes}")
    for name, value in params.items():
        low = 0 if name == "seed" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"ann_params[{name!r}] must be an integer >= {low}, got {value!r}")
    return {**allowed, **params}


def resolve_params(kind: str, params: Mapping[str, Any] | None, num_passages: int) -> dict[str, int]:
    """Checked parameters with the size-dependent defaults filled in: IVF's ``nlist`` (default:
    ``round(4 * sqrt(N))``), ``train_size`` (default: ``min(N, 64 * nlist)``) and ``nprobe``
    (at most ``nlist``)."""
    resolved = check_ann(kind, params)
    if kind == "ivf":
        nlist = resolved["nlist"] or max(1, min(num_passages, round(4 * math.sqrt(num_passages))))
        if nlist > num_passages:
            raise ValueError(f"ann_params['nlist'] = {nlist} exceeds the {num_passages} passages")
        train_size = resolved["train_size"] or min(num_passages, 64 * nlist)
        if not nlist <= train_size <= num_passages:
            raise ValueError(f"ann_params['train_size'] = {train_size} must be between nlist ({nlist}) and the {num_passages} passages")
        resolved.update(nlist=nlist, train_size=train_size, nprobe=min(resolved["nprobe"], nlist))
    return resolved


class ANNIndex:
    """A FAISS index over ``N`` unit-norm passage embeddings (inner product = cosine).

    Build one with :meth:`build`; :meth:`search` gives each query's approximate top ``k`` rows.
    ``kind`` and ``params`` are what :func:`resolve_params` made of the arguments.
    """

    def __init__(self, index: faiss.Index, kind: str, params: Mapping[str, int]):
        import faiss

        if index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError("the FAISS index must use the inner-product metric")
        self.faiss_index, self.kind, self.params = index, kind, dict(params)
        self.set_search(self.params[SEARCH_PARAM[kind]])

    @classmethod
    def build(cls, embeddings: Tensor, kind: str = "hnsw", params: Mapping[str, Any] | None = None) -> ANNIndex:
        """Index ``embeddings`` (``[N, d]``, unit-norm) with ``kind`` = ``"hnsw"`` (``M``,
        ``ef_construction``, ``ef_search``) or ``"ivf"`` (``nlist``, ``nprobe``, and k-means
        trained on ``train_size`` rows drawn with ``seed``) (default parameters:
        :data:`DEFAULT_PARAMS`)."""
        import faiss

        if kind == "exact":
            raise ValueError("ann='exact' scans every passage and builds no FAISS index")
        n, dim = embeddings.shape
        resolved = resolve_params(kind, params, n)
        x = _as_faiss(embeddings)
        if kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, resolved["M"], faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = resolved["ef_construction"]
        else:
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, resolved["nlist"], faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = resolved["seed"]
            sample = torch.randperm(n, generator=torch.Generator().manual_seed(resolved["seed"]))[: resolved["train_size"]]
            index.train(x[np.sort(sample.numpy())])
        index.add(x)
        return cls(index, kind, resolved)

    def set_search(self, value: int) -> None:
        """Set the search-time parameter (HNSW's ``ef_search``, IVF's ``nprobe``, at most
        ``nlist``): larger finds more of the true neighbours, slower."""
        name = SEARCH_PARAM[self.kind]
        check_ann(self.kind, {name: value})
        if self.kind == "hnsw":
            self.faiss_index.hnsw.efSearch = value
        else:
            value = min(value, self.params["nlist"])
            self.faiss_index.nprobe = value
        self.params[name] = value

    def extended(self, embeddings: Tensor) -> ANNIndex:
        """A copy with unit-norm rows appended (they get the next row numbers); this index, which
        retrievers built before may hold, is left as it is."""
        if embeddings.size(-1) != self.dim:
            raise ValueError(f"embeddings have size {embeddings.size(-1)}, the ANN index {self.dim}")
        import faiss

        copy = ANNIndex(faiss.clone_index(self.faiss_index), self.kind, self.params)
        copy.faiss_index.add(_as_faiss(embeddings))
        return copy

    def rebuilt(self, embeddings: Tensor) -> ANNIndex:
        """A new index of the same kind over ``embeddings``, with the same parameters except
        IVF's sizes that were derived from the old corpus size (derived again)."""
        params = dict(self.params)
        if self.kind == "ivf":
            derived = resolve_params("ivf", {}, self.num_passages)
            params = {k: v for k, v in params.items() if k not in ("nlist", "train_size") or v != derived[k]}
            n = embeddings.size(0)
            params = {k: min(v, n) if k in ("nlist", "train_size") else v for k, v in params.items()}
            if "train_size" in params and "nlist" in params:
                params["train_size"] = max(params["train_size"], params["nlist"])
        return ANNIndex.build(embeddings, self.kind, params)

    @property
    def num_passages(self) -> int:
        return int(self.faiss_index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.faiss_index.d)

    def search(self, queries: Tensor, k: int) -> Tensor:
        """The approximate top ``k`` rows of every unit-norm query, ``[Q, k]`` int64 on the CPU,
        best first; ``-1`` where the index found fewer than ``k`` passages."""
        _, rows = self.faiss_index.search(_as_faiss(queries), k)
        return torch.from_numpy(rows)

    def to_bytes(self) -> Tensor:
        """The serialised FAISS index as a ``uint8`` tensor."""
        import faiss

        return torch.from_numpy(faiss.serialize_index(self.faiss_index))

    @classmethod
    def from_bytes(cls, data: Tensor, kind: str, params: Mapping[str, int]) -> ANNIndex:
        """The index :meth:`to_bytes` serialised; ``ValueError`` when it is not an index of ``kind``."""
        import faiss

        index = faiss.deserialize_index(np.ascontiguousarray(data.numpy()))
        expected = faiss.IndexHNSWFlat if kind == "hnsw" else faiss.IndexIVFFlat
        if not isinstance(index, expected):
            raise ValueError(f"the stored FAISS index is a {type(index).__name__}, not the {kind} index its metadata says")  # noqa: TRY004 - a bad file, as documented
        return cls(index, kind, params)

    def save(self, path: str | Path) -> None:
        """Write a safetensors file: the bytes as tensor ``index``, kind and parameters as metadata."""
        save_file({"index": self.to_bytes()}, path, metadata={"kind": self.kind, "params": json.dumps(self.params)})

    @classmethod
    def load(cls, path: str | Path) -> ANNIndex:
        """The index :meth:`save` wrote (``ValueError`` for anything else)."""
        with safe_open(path, "pt") as handle:
            metadata = handle.metadata() or {}
            if "kind" not in metadata or "params" not in metadata or "index" not in handle.keys():  # noqa: SIM118 - safe_open has no `in`
                raise ValueError("not an ANN index file (needs tensor 'index' and metadata 'kind', 'params')")
            kind, params = metadata["kind"], json.loads(metadata["params"])
            check_ann(kind, params)
            if kind == "exact":
                raise ValueError("an ANN index file cannot be of kind 'exact'")
            return cls.from_bytes(handle.get_tensor("index"), kind, params)


def _as_faiss(x: Tensor) -> np.ndarray:
    """A contiguous float32 NumPy view (or copy) of ``x`` on the CPU, as FAISS takes it."""
    return np.ascontiguousarray(x.detach().to("cpu", torch.float32).numpy())
