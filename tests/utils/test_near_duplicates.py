"""Near-duplicates in a ranking go after the rest."""
from __future__ import annotations

import torch

from isorag_pyg.utils import near_duplicates_last


def unit(*rows):
    return torch.nn.functional.normalize(torch.tensor(rows, dtype=torch.float), dim=-1)


def test_an_entry_is_compared_with_the_kept_entries_only_and_padding_stays_last():
    # b nearly repeats a (cosine 0.94); c is as close to b but not to a (0.77): c is kept (b, a near-duplicate, does not count)
    a, b, c = [1.0, 0.0], [0.94, 0.342], [0.766, 0.643]
    vectors = torch.stack([unit(a, b, c, a), unit(a, c, c, c)])
    valid = torch.tensor([[True, True, True, True], [True, True, True, False]])
    order = near_duplicates_last(vectors, valid, threshold=0.9)
    assert order.tolist() == [[0, 2, 1, 3], [0, 1, 2, 3]]


def test_a_threshold_above_every_cosine_keeps_the_ranking():
    vectors = unit([1.0, 0.0], [0.0, 1.0], [0.7, 0.7]).unsqueeze(0)
    assert near_duplicates_last(vectors, torch.ones(1, 3, dtype=torch.bool), 1.01).tolist() == [[0, 1, 2]]
