"""An index for a dataset, reused from a cache keyed by everything that shapes it: the library's
one entry for "open or build the index these settings describe", with plain arguments. The
``evaluate`` and ``train`` apps and the benchmarks all come through here."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from isorag_pyg.datasets import QADataset
from isorag_pyg.encoders import TextEncoder
from isorag_pyg.graph import BUILDERS_VERSION
from isorag_pyg.graph.auto import graph_knobs
from isorag_pyg.index.build import graph_spec_of
from isorag_pyg.index.corpus import corpus_hash
from isorag_pyg.index.index import ISORAGIndex
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.store.layout import IndexFormatError
from isorag_pyg.training.config import FThetaConfig

log = logging.getLogger(__name__)

#: Graph builders that read the questions' contexts: their index depends on the questions too.
QUESTION_GRAPHS = frozenset({"context_cooccurrence", "train_cooccurrence"})


def index_cache_path(cache_dir: Path, dataset: QADataset, train: QADataset | None, encoder: TextEncoder,
                     graph: dict[str, dict[str, Any]], phi: PhiSpec, f_theta: FThetaConfig | None) -> Path:
    """``cache_dir/indexes/<key>``: the key hashes the corpus, the encoder's fingerprint, the
    graph spec, the builders' version (:data:`~isorag_pyg.graph.BUILDERS_VERSION`), φ, f_θ's
    config (``None``: no f_θ), the retriever knobs an index of that graph stores
    (:func:`~isorag_pyg.graph.auto.graph_knobs`, where there are any: an entity graph's, title mentions') and, for
    graphs built from questions' contexts, the questions."""
    parts: dict[str, Any] = {"corpus": corpus_hash(dataset.corpus), "encoder": encoder.fingerprint, "graph": graph,
                             "builders_version": BUILDERS_VERSION, "phi": asdict(phi), "f_theta": f_theta.to_dict() if f_theta is not None else None}
    if knobs := graph_knobs(graph):  # a cached index keeps the knobs it was built with: new ones need a new entry
        parts["graph_knobs"] = knobs
    if QUESTION_GRAPHS & set(graph):
        parts["questions"] = [[q.id, q.context_ids] for ds in (dataset, train) if ds is not None for q in ds.questions]
    key = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return cache_dir / "indexes" / key


def cached_index(dataset: QADataset, train: QADataset | None, *, encoder: TextEncoder, graph: dict[str, dict[str, Any]] | None,
                 phi: PhiSpec, f_theta: FThetaConfig | None, cache_dir: Path | None, work_dir: Path | None = None,
                 save: bool = True, **build_options: Any) -> ISORAGIndex:
    """The index over ``dataset``'s corpus for these settings: the cached one (under
    :func:`index_cache_path`) when it opens, else a new one (``train``'s questions feed the graph
    builders that read them; f_θ trained in ``work_dir``), saved there when ``save``.
    ``cache_dir`` ``None`` builds without a cache; ``build_options`` go to :meth:`ISORAGIndex.build`
    (``logger``, ``ckpt_path``, ``progress``). ``graph`` ``None`` is the automatic graph of the corpus
    (:func:`~isorag_pyg.graph.auto.auto_graph`), resolved here so that the key names its builders."""
    graph = graph_spec_of(graph, dataset.corpus)
    cached = None if cache_dir is None else index_cache_path(cache_dir, dataset, train, encoder, graph, phi, f_theta)
    if cached is not None and cached.is_dir():
        try:
            return ISORAGIndex.load(cached)
        except IndexFormatError as err:
            log.warning("discarding unusable cached index (%s); rebuilding", err)
    index = ISORAGIndex.build(dataset.corpus, encoder=encoder, graph=graph, f_theta=f_theta, phi=phi, questions=dataset,
                              train_questions=train, work_dir=work_dir if f_theta is not None else None, **build_options)
    if cached is not None and save:
        index.save(cached)
    return index
