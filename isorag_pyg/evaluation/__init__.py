"""Evaluation: retrieval metrics, the evaluate.py job, held-out selection and case-study plots."""
from isorag_pyg.evaluation.metrics import per_question_recall, retrieval_metrics
from isorag_pyg.evaluation.selection import cross_validated_selection

__all__ = ["cross_validated_selection", "per_question_recall", "retrieval_metrics"]
