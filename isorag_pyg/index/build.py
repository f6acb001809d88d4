"""The build pipeline: passages -> embeddings -> corpus graph -> f_θ -> φ -> (ANN), as the
keyword arguments of one :class:`~isorag_pyg.index.ISORAGIndex` constructor call."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from isorag_pyg import defaults
from isorag_pyg.datasets.corpus_files import check_max_tokens
from isorag_pyg.datasets.types import Passage, QADataset, train_eval_overlap
from isorag_pyg.encoders import SentenceEncoder, TextEncoder
from isorag_pyg.encoders.spec import build_encoder, encoder_spec
from isorag_pyg.graph import BUILDER_NAMES, EmptyGraphError, build_corpus_graph, graph_statistics, run_builders
from isorag_pyg.graph.auto import auto_graph, describe_graph, graph_knobs
from isorag_pyg.index.corpus import as_passages, corpus_hash
from isorag_pyg.index.f_theta import adopt_f_theta, train_f_theta
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.progress import progress as show_progress
from isorag_pyg.retrieval.ann import ANNIndex, resolve_params
from isorag_pyg.store.contents import IndexContents
from isorag_pyg.store.passages import PassageStore
from isorag_pyg.training.config import FThetaConfig
from isorag_pyg.utils.bridging import bridging_from_ball
from isorag_pyg.utils.isoperimetric import log_phi_from_ball

log = logging.getLogger(__name__)

def resolve_f_theta(f_theta: FThetaConfig | PoincareEncoder | None | str, phi: PhiSpec) -> FThetaConfig | PoincareEncoder | None:
    """``"auto"``: the default training when ``phi`` needs coordinates, else none; the rest as given."""
    if isinstance(f_theta, str):
        if f_theta != "auto":
            raise ValueError(f"f_theta must be an FThetaConfig, a PoincareEncoder, None or 'auto', got {f_theta!r}")
        f_theta = FThetaConfig() if phi.needs_coordinates else None
    if f_theta is None and phi.needs_coordinates:
        raise ValueError(f"φ with p = {phi.p} needs f_θ: pass f_theta=FThetaConfig() or phi=PhiSpec(p=0)")
    return f_theta


def graph_spec_of(graph: Mapping[str, Mapping[str, Any] | None] | None, corpus: list[Passage]) -> dict[str, dict[str, Any]]:
    """Builder name -> arguments, checked (default: chosen by what ``corpus`` supports,
    :func:`~isorag_pyg.graph.auto.auto_graph`)."""
    spec = {name: dict(kwargs or {}) for name, kwargs in (graph if graph is not None else auto_graph(corpus)).items()}
    if unknown := [name for name in spec if name not in BUILDER_NAMES]:
        raise ValueError(f"unknown graph builder {unknown[0]!r}; choose from {', '.join(BUILDER_NAMES)}")
    return spec


def passage_encoder(model: str | None = None, backend: str = "torch", devices: Sequence[str] | None = None, pool_tokens: bool = False,
                    ray: str | None = None, ray_workers: int = defaults.RAY_WORKERS, ray_cpus: float = defaults.RAY_CPUS_PER_WORKER,
                    ray_gpus: float = defaults.RAY_GPUS_PER_WORKER, show_progress: bool = True) -> TextEncoder:
    """The encoder that embeds a corpus for :func:`build_index`: ``model`` (default
    :data:`~isorag_pyg.defaults.ENCODER`) on ``backend`` (:func:`~isorag_pyg.encoders.spec.build_encoder`),
    in one process per device of ``devices``, or on Ray actors (``ray``: ``"local"`` or a cluster
    address; ``ray_workers`` actors of ``ray_cpus`` CPUs and ``ray_gpus`` GPUs each). Choices that
    do not go together fail here, before a model loads."""
    if ray is not None and devices:
        raise ValueError("Ray and encode devices are two ways to spread the encoding (--ray, --encode-devices): choose one")
    if ray is not None and (backend != "torch" or pool_tokens):
        raise ValueError("Ray encodes with the torch backend: drop --encoder-backend and --pool-tokens (backend, pool_tokens)")
    if ray is not None:
        from isorag_pyg.scale import RayEncoder

        return RayEncoder(model or defaults.ENCODER, address=None if ray == "local" else ray, workers=ray_workers,
                          cpus_per_worker=ray_cpus, gpus_per_worker=ray_gpus)
    name = model if backend == "openai" else model or defaults.ENCODER  # a server's model has no default
    return build_encoder(name, backend, show_progress=show_progress, devices=devices, pool_tokens=pool_tokens)


def build_index(
    passages: Sequence[Passage | Mapping[str, Any]],
    encoder: str | TextEncoder = defaults.ENCODER,
    graph: Mapping[str, Mapping[str, Any] | None] | None = None,
    f_theta: FThetaConfig | PoincareEncoder | None | str = "auto",
    phi: PhiSpec = PhiSpec(),
    questions: QADataset | None = None,
    train_questions: QADataset | None = None,
    work_dir: str | Path | None = None,
    logger: Any = False,
    ckpt_path: str | Path | None = None,
    progress: bool = True,
    ann: str = "exact",
    ann_params: Mapping[str, int] | None = None,
    max_tokens: int = defaults.MAX_TOKENS,
) -> dict[str, Any]:
    """The constructor arguments of an index over ``passages`` (the arguments are
    :meth:`ISORAGIndex.build`'s; ``max_tokens``: the budget the passages' documents were split
    at, which :meth:`ISORAGIndex.read_additions` splits later documents at). Bad arguments fail
    before minutes of encoding."""
    check_max_tokens(max_tokens)
    corpus = as_passages(passages)
    f_theta = resolve_f_theta(f_theta, phi)
    resolve_params(ann, ann_params, len(corpus))
    spec = graph_spec_of(graph, corpus)
    with show_progress(total=3 + (f_theta is not None) + (ann != "exact"), desc="index", enabled=progress) as stages:
        stages.set_postfix_str("encoding passages")
        encoder = SentenceEncoder(encoder, show_progress=progress) if isinstance(encoder, str) else encoder
        x = encoder.encode([p.content for p in corpus])
        stages.update()
        stages.set_postfix_str("graph")
        edges = run_builders(spec, corpus, x, eval_questions=questions, train_questions=train_questions)
        data = build_corpus_graph(corpus, x, edges)
        if data.edge_index.numel() == 0 and f_theta is not None and not isinstance(f_theta, PoincareEncoder):
            raise EmptyGraphError(f"the graph builders ({', '.join(spec)}) found no edge in this corpus: f_θ needs edges to "
                                  "learn from; use phi=PhiSpec(p=0) and f_theta=None, or another graph")
        if "train_cooccurrence" in spec and train_eval_overlap(questions, train_questions):
            log.warning("training questions are also evaluation questions: train_cooccurrence LEAKS")
            data.leak = True
        stages.update()
        fitted = None
        if isinstance(f_theta, PoincareEncoder):
            fitted = adopt_f_theta(f_theta, data.x, phi.curvature)  # an entity graph's entity nodes too
        elif f_theta is not None:
            stages.set_postfix_str("training f_θ")
            fitted = train_f_theta(data, f_theta, phi.curvature, work_dir, logger, ckpt_path)
            stages.update()
        stages.set_postfix_str("φ")
        z = None if fitted is None else fitted.z
        log_phi = log_phi_from_ball(data.edge_index, z, phi, num_nodes=data.num_nodes)
        bridging = bridging_from_ball(data.edge_index, z, phi, num_nodes=data.num_nodes)
        stages.update()
        ann_index = None
        if ann != "exact":
            stages.set_postfix_str(f"ANN ({ann})")
            ann_index = ANNIndex.build(x, ann, ann_params)
            stages.update()
    statistics = {**graph_statistics(data), "builders": list(data.builders)}
    for line in describe_graph(statistics):  # a warning when most passages are isolated is logged as one
        (log.warning if line.startswith("warning:") else log.info)(line)
    if statistics["leak"]:
        log.warning("LEAK: this graph is built from the evaluated questions' own contexts; its metrics are not held-out results")
    contents = IndexContents(PassageStore(corpus), x, data, log_phi, bridging, statistics, corpus_hash(corpus), z, edges.get("knn"))
    return {"contents": contents, "encoder": encoder_spec(encoder, x.size(1)),
            "phi": phi, "graph_spec": spec, "f_theta": None if fitted is None else fitted.encoder,
            "f_theta_info": None if fitted is None else fitted.info, "ann": ann_index, "knobs": graph_knobs(spec),
            "max_tokens": max_tokens}
