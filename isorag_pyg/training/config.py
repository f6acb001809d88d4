"""How f_θ is trained, as plain data (no Lightning import)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Lightning ``Trainer`` arguments used when none are given (the ``trainer=default`` config's; a
#: test keeps the two equal).
DEFAULT_TRAINER: dict[str, Any] = {
    "accelerator": "auto",
    "devices": 1,
    "max_epochs": 30,
    "deterministic": True,
    "log_every_n_steps": 10,
    "check_val_every_n_epoch": 1,
    "enable_progress_bar": True,
}


@dataclass
class FThetaConfig:
    """How f_θ is trained: keyword arguments of
    :class:`~isorag_pyg.training.HyperbolicEmbeddingModule` (``model``, without ``in_dim`` and
    ``curvature``, which come from the embeddings and the φ spec), of
    :class:`~isorag_pyg.training.GraphTripletDataModule` (``data``) and of the Lightning
    ``Trainer`` (``trainer``, default :data:`DEFAULT_TRAINER`), and the seed. Missing keys take
    those classes' defaults."""

    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    trainer: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_TRAINER))
    seed: int = 42

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
