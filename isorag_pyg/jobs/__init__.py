"""The hydra entry points' jobs (the ``train`` and ``evaluate`` apps): configs in, the library's plain calls out."""
