"""How much of a tuned score survives held-out selection: repeated k-fold cross-validation of
"pick the setting with the best mean score" over per-question scores."""
from __future__ import annotations

from collections.abc import Hashable, Mapping

import torch
from torch import Tensor


def cross_validated_selection(
    scores: Mapping[Hashable, Tensor], folds: int = 2, repeats: int = 3, seed: int = 0
) -> dict[str, float]:
    """Select the best setting on all folds but one, score it on the held-out fold.

    ``scores`` maps each setting to its per-question scores (same questions, same order). For
    every repeat the questions are shuffled and cut into ``folds`` parts; each part in turn is
    held out while the setting with the best mean on the other parts is chosen (the first in
    ``scores`` order on ties). Returns ``held_out`` (the chosen settings' scores on the held-out
    questions, averaged over questions and repeats) and ``in_sample`` (the best mean over all
    questions, which selection on the evaluated questions themselves reports).

    Args:
        scores: setting -> ``[Q]`` per-question scores.
        folds: parts the questions are cut into (default: ``2``).
        repeats: independent shuffles (default: ``3``).
        seed: seed of the shuffles (default: ``0``).

    Example:
        >>> import torch
        >>> s = {"a": torch.tensor([1., 1., 0., 1.]), "b": torch.tensor([0., 0., 0., 1.])}
        >>> cross_validated_selection(s, folds=2, repeats=1)
        {'held_out': 0.75, 'in_sample': 0.75}
    """
    if not scores:
        raise ValueError("no settings to select from")
    rows = [torch.as_tensor(v, dtype=torch.float64) for v in scores.values()]
    shapes = {tuple(row.shape) for row in rows}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"every setting needs one score per question (1-D, same length), got shapes {sorted(shapes)}")
    table = torch.stack(rows)
    if not torch.isfinite(table).all():
        raise ValueError("per-question scores contain NaN or inf")
    num_questions = table.size(1)
    if not 2 <= folds <= num_questions:
        raise ValueError(f"folds must lie in [2, {num_questions}] (the number of questions), got {folds}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    generator = torch.Generator().manual_seed(seed)
    held_out = 0.0
    for _ in range(repeats):
        for test in torch.randperm(num_questions, generator=generator).chunk(folds):
            train = torch.ones(num_questions, dtype=torch.bool)
            train[test] = False
            best = int(table[:, train].mean(1).argmax())  # argmax returns the first maximum
            held_out += float(table[best, test].sum())
    return {"held_out": held_out / (repeats * num_questions), "in_sample": float(table.mean(1).max())}
