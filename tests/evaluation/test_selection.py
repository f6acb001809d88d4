"""Per-question recall and the cross-validated selection behind tune_iso.py's held-out figures."""
from __future__ import annotations

import pytest
import torch

from isorag_pyg.evaluation.metrics import per_question_recall, retrieval_metrics
from isorag_pyg.evaluation.selection import cross_validated_selection


def test_per_question_recall_averages_to_the_reported_recall():
    generator = torch.Generator().manual_seed(0)
    indices = torch.stack([torch.randperm(40, generator=generator)[:10] for _ in range(30)])
    gold = [set(torch.randint(0, 40, (int(n),), generator=generator).tolist()) for n in torch.randint(0, 4, (30,), generator=generator)]
    per_question = per_question_recall(indices, gold, 5)
    assert per_question.numel() == sum(1 for g in gold if g)  # questions without gold are not scored
    for q, row in enumerate(r for r, g in zip(indices.tolist(), gold) if g):
        relevant = [g for g in gold if g][q]
        assert per_question[q].item() == pytest.approx(len(relevant & set(row[:5])) / len(relevant))
    assert per_question.mean().item() == pytest.approx(retrieval_metrics(indices, gold)["recall@5"])


def test_a_truly_better_setting_keeps_its_score_held_out():
    generator = torch.Generator().manual_seed(1)
    good = (torch.rand(400, generator=generator) < 0.8).double()
    bad = {f"bad{i}": (torch.rand(400, generator=generator) < 0.5).double() for i in range(5)}
    result = cross_validated_selection({**bad, "good": good}, folds=2, repeats=3)
    assert result["in_sample"] == pytest.approx(good.mean().item())
    assert result["held_out"] == pytest.approx(good.mean().item())


def test_selecting_among_equal_settings_is_optimistic_in_sample_only():
    generator = torch.Generator().manual_seed(2)
    noise = {i: (torch.rand(60, generator=generator) < 0.5).double() for i in range(50)}
    result = cross_validated_selection(noise, folds=2, repeats=5)
    # every setting has the same true score 0.5: the best in-sample mean is inflated by the choice,
    # the held-out score is not
    assert result["in_sample"] > 0.6
    assert abs(result["held_out"] - 0.5) < 0.07
    assert result["in_sample"] - result["held_out"] > 0.05


def test_selection_arguments_are_checked():
    with pytest.raises(ValueError, match="no settings"):
        cross_validated_selection({})
    with pytest.raises(ValueError, match="folds"):
        cross_validated_selection({"a": torch.ones(3)}, folds=4)
    with pytest.raises(ValueError, match="repeats"):
        cross_validated_selection({"a": torch.ones(3)}, repeats=0)
    with pytest.raises(ValueError, match="one score per question"):
        cross_validated_selection({"a": torch.ones(4), "b": torch.ones(3)})
    with pytest.raises(ValueError, match="one score per question"):
        cross_validated_selection({"a": torch.ones(2, 2)})
    with pytest.raises(ValueError, match="NaN or inf"):
        cross_validated_selection({"a": torch.tensor([1.0, float("nan"), 0.0])})
