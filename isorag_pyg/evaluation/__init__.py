"""Evaluation: retrieval metrics, the side-by-side loop, held-out selection and case-study plots."""
from isorag_pyg.evaluation.compare import (
    RetrieverRun,
    evaluate_retrievers,
    time_retrieval,
)
from isorag_pyg.evaluation.metrics import per_question_recall, retrieval_metrics
from isorag_pyg.evaluation.selection import cross_validated_selection

__all__ = ["RetrieverRun", "cross_validated_selection", "evaluate_retrievers", "per_question_recall", "retrieval_metrics", "time_retrieval"]
