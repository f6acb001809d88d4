"""Dataset loaders: native multi-hop QA formats and the synthetic generator."""
from isorag_pyg.datasets.errors import DatasetFormatError
from isorag_pyg.datasets.loader import load_qa_dataset
from isorag_pyg.datasets.synthetic import generate_synthetic_dataset
from isorag_pyg.datasets.types import (
    MatchReport,
    Passage,
    QADataset,
    Question,
    train_eval_overlap,
)

__all__ = [
    "DatasetFormatError",
    "MatchReport",
    "Passage",
    "QADataset",
    "Question",
    "generate_synthetic_dataset",
    "load_qa_dataset",
    "train_eval_overlap",
]
