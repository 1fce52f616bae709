"""Evaluation metrics for kbert's tasks (numpy implementations, no framework needed)."""

from kbert.evaluation.classification import (
    accuracy,
    classification_metrics,
    f1_score,
    matthews_corrcoef,
    pearson,
    regression_metrics,
    spearman,
)

__all__ = ["accuracy", "classification_metrics", "f1_score", "matthews_corrcoef", "pearson",
           "regression_metrics", "spearman"]
