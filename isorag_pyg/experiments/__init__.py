"""Experiment plumbing above the index, evaluation and QA: the index that some settings describe
(built once, then opened from a cache), retrievers scored on questions with gold passages, and
knobs tuned on them. The ``evaluate`` and ``train`` apps, ``isorag tune`` and the benchmarks come
through here with plain arguments."""
