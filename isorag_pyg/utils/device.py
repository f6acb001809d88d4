"""Which device a process computes on."""
from __future__ import annotations

import os

import torch


def device_of(name: str | torch.device | None) -> torch.device:
    """``"auto"``/``None`` -> this process's GPU when CUDA is available (``cuda:LOCAL_RANK``, so the
    DDP ranks of one machine each take their own), else the CPU; any other name as given."""
    if name in (None, "auto"):
        if not torch.cuda.is_available():
            return torch.device("cpu")
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    return torch.device(name)
