"""Hydra/omegaconf configs -> the plain arguments the library takes. The only module (with the
other ``jobs`` modules) that reads a ``DictConfig``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from isorag_pyg.datasets import QADataset, generate_synthetic_dataset, load_qa_dataset
from isorag_pyg.datasets.download import download_hipporag_files
from isorag_pyg.encoders import TextEncoder, default_cache_dir
from isorag_pyg.encoders.spec import build_encoder
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.qa.reader_spec import ReaderSpec
from isorag_pyg.training.config import FThetaConfig
from isorag_pyg.utils.device import device_of

#: Keys of a ``retriever`` config that are not the retriever's knobs.
RETRIEVER_META = ("name", "kind", "device")


def plain(node: Any) -> Any:
    """A config node as plain Python containers (interpolations resolved)."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def dataset_splits(cfg: DictConfig) -> tuple[QADataset, QADataset | None]:
    """(evaluation, training) datasets named by a ``dataset`` config."""
    if cfg.source == "synthetic":
        params = plain(cfg.generator)
        return generate_synthetic_dataset(split="dev", **params), generate_synthetic_dataset(split="train", **params)
    if cfg.source != "files":
        raise ValueError(f"dataset.source must be 'synthetic' or 'files', got {cfg.source!r}")
    data_dir = Path(cfg.data_dir).expanduser()

    def resolve(relative: str | None) -> Path | None:
        return None if relative is None else data_dir / relative

    eval_questions, eval_corpus = resolve(cfg.eval_questions), resolve(cfg.get("eval_corpus"))
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
        train_ds = load_qa_dataset(resolve(cfg.train_questions), resolve(cfg.get("train_corpus")), name=f"{cfg.name}-train")
    return eval_ds, train_ds


def split_datasets(cfg: DictConfig) -> tuple[QADataset, QADataset | None]:
    """The questions to evaluate (the first ``max_questions``) and the training questions beside
    them. ``split: train`` evaluates the training questions over their own corpus (tuning without
    the dev questions); there are then no other training questions."""
    eval_ds, train_ds = dataset_splits(cfg.dataset)
    split = cfg.get("split", "dev")
    if split == "train":
        if train_ds is None:
            raise ValueError(f"dataset {cfg.dataset.name} has no training questions for split=train")
        eval_ds, train_ds = train_ds, None
    elif split != "dev":
        raise ValueError(f"split must be 'dev' or 'train', got {split!r}")
    if cfg.get("max_questions"):
        eval_ds.questions = eval_ds.questions[: cfg.max_questions]
    return eval_ds, train_ds


def encoder(cfg: DictConfig, backend: str | None = None) -> TextEncoder:
    """The configured encoder (``encoder.backend``, or ``backend`` when given): a
    sentence-transformers model, or with ``openai`` a model of an OpenAI-compatible server."""
    backend = backend or cfg.get("backend", "torch")
    if backend == "openai":
        return build_encoder(cfg.model, "openai", base_url=cfg.get("base_url"), dim=cfg.get("dim"), batch_size=cfg.batch_size,
                             concurrency=cfg.get("concurrency", 4), cache_dir=cfg.get("cache_dir", "default"),
                             pool_tokens=cfg.get("pool_tokens", False))
    return build_encoder(cfg.model, backend, batch_size=cfg.batch_size, device=str(device_of(cfg.get("device"))),
                         cache_dir=cfg.get("cache_dir", "default"), show_progress=cfg.get("show_progress", True))


def graph_spec(cfg: DictConfig) -> dict[str, dict[str, Any]] | None:
    """The graph builders a ``graph`` config names (``None``: the automatic graph, ``graph=auto``)."""
    builders = plain(cfg.graph.builders)
    return None if builders is None else {name: dict(kwargs or {}) for name, kwargs in builders.items()}


def phi_spec(cfg: DictConfig) -> PhiSpec:
    return PhiSpec(**plain(cfg.phi))


def index_cache_dir(cfg: DictConfig) -> Path | None:
    """The folder ``encoder.cache_dir`` names for cached indexes (``None``: caching is off)."""
    directory = cfg.encoder.get("cache_dir", "default")
    if directory is None:
        return None
    return default_cache_dir() if directory == "default" else Path(directory)


def needs_f_theta(cfg: DictConfig, retrievers: list[DictConfig]) -> bool:
    """``train_f_theta``: ``true``/``false``, or ``auto``: when φ or one of ``retrievers`` uses
    ball coordinates (``p > 0``)."""
    choice = cfg.get("train_f_theta", "auto")
    if choice == "auto":
        return phi_spec(cfg).needs_coordinates or any(float(r.get("p") or 0.0) > 0 for r in retrievers)
    if not isinstance(choice, bool):
        raise TypeError(f"train_f_theta must be auto, true or false, got {choice!r}")
    return choice


def f_theta_config(cfg: DictConfig) -> FThetaConfig:
    trainer = {k: v for k, v in plain(cfg.trainer).items() if k != "_target_"}
    return FThetaConfig(model=plain(cfg.model), data=plain(cfg.data), trainer=trainer, seed=int(cfg.seed))


def index_settings(cfg: DictConfig, with_f_theta: bool = True, backend: str | None = None) -> dict[str, Any]:
    """:meth:`~isorag_pyg.index.ISORAGIndex.build`'s settings in an ``eval``/``train`` config (also
    :func:`~isorag_pyg.experiments.index_cache.cached_index`'s): the encoder (on ``backend``: default the
    configured one), graph, φ, f_θ's config (``None`` unless ``with_f_theta``), its logger and
    checkpoint, and the progress bar."""
    return {"encoder": encoder(cfg.encoder, backend), "graph": graph_spec(cfg), "phi": phi_spec(cfg),
            "f_theta": f_theta_config(cfg) if with_f_theta else None, "logger": lightning_logger(cfg),
            "ckpt_path": cfg.get("ckpt_path"), "progress": cfg.encoder.get("show_progress", True)}


def lightning_logger(cfg: DictConfig) -> Any:
    """The configured Lightning logger (wandb stays offline unless told otherwise), or ``False``."""
    if cfg.get("logger") is None:
        return False
    if "wandb" in str(cfg.logger.get("_target_", "")).lower():
        os.environ.setdefault("WANDB_MODE", "offline" if cfg.logger.get("offline", True) else "online")
        os.environ.setdefault("WANDB_SILENT", "true")
    return instantiate(cfg.logger)


def retriever_knobs(rcfg: DictConfig) -> tuple[str, str, dict[str, Any]]:
    """(label, retriever name for :meth:`ISORAGIndex.retriever`, knobs) of a ``retriever`` config;
    the knobs are those it sets: a null knob is left to the index (what it stores, else the default)."""
    knobs = {k: v for k, v in plain(rcfg).items() if k not in RETRIEVER_META and v is not None}
    return rcfg.name, rcfg.kind, knobs


def reader_spec(cfg: DictConfig, out_dir: Path) -> ReaderSpec:
    """The reader that ``cfg`` (a ``qa`` config) names, the one place that reads it: its values as
    :meth:`ReaderSpec.from_config` takes them (a ``???`` left unset is an error naming it), an
    ``openai`` reader's answers cached in ``qa.cache_path`` (null: ``<out_dir>/qa_answers.jsonl``).
    ``qa.model_path: null`` (transformers) is the packaged Gemma 3 270M GGUF."""
    values = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    if values.get("kind") == "openai" and not values.get("cache_path"):
        values["cache_path"] = out_dir / "qa_answers.jsonl"
    return ReaderSpec.from_config(values)
