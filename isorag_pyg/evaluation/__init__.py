"""Evaluation: retrieval metrics, the evaluate.py job and case-study plots."""
from isorag_pyg.evaluation.metrics import retrieval_metrics

__all__ = ["retrieval_metrics"]
