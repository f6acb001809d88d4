"""The hydra entry points' jobs (train.py, evaluate.py): configs in, the library's plain calls out."""
