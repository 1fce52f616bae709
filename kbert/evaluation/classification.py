"""GLUE-style metrics in numpy: accuracy, F1, Matthews correlation, Pearson and Spearman.

Each takes `labels` and `predictions` as array-likes of the same length (class ids for the
classification metrics, real numbers for the correlations) and returns a Python float. The
names of the dict keys returned by `classification_metrics` / `regression_metrics` are the ones
`metrics.json` uses: `accuracy`, `f1`, `matthews_corrcoef`, `pearson`, `spearman`.
"""

import numpy as np


def _pair(labels, predictions):
    labels = np.asarray(labels).reshape(-1)
    predictions = np.asarray(predictions).reshape(-1)
    if labels.shape != predictions.shape:
        raise ValueError(f"labels ({labels.shape[0]}) and predictions ({predictions.shape[0]}) "
                         "differ in length.")
    if labels.size == 0:
        raise ValueError("No examples to score.")
    return labels, predictions


def accuracy(labels, predictions) -> float:
    """Fraction of predictions equal to their label."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def _confusion(labels, predictions, num_classes=None):
    labels, predictions = _pair(labels, predictions)
    labels, predictions = labels.astype(np.int64), predictions.astype(np.int64)
    if num_classes is None:
        num_classes = int(max(labels.max(), predictions.max())) + 1
    matrix = np.zeros((num_classes, num_classes), np.int64)  # rows: true, columns: predicted
    np.add.at(matrix, (labels, predictions), 1)
    return matrix


def f1_score(labels, predictions, average="binary", positive_label=1) -> float:
    """F1 of class `positive_label` ("binary", GLUE's MRPC/QQP F1), or "macro" / "micro" averages.

    A class that is never predicted nor present has F1 0 (as scikit-learn with zero_division=0).
    """
    labels, predictions = _pair(labels, predictions)
    if average == "binary":
        tp = np.sum((predictions == positive_label) & (labels == positive_label))
        fp = np.sum((predictions == positive_label) & (labels != positive_label))
        fn = np.sum((predictions != positive_label) & (labels == positive_label))
        return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0
    matrix = _confusion(labels, predictions)
    tp = np.diag(matrix).astype(np.float64)
    if average == "micro":
        return float(tp.sum() / matrix.sum())
    if average != "macro":
        raise ValueError(f"average must be 'binary', 'macro' or 'micro', got {average!r}.")
    denominator = matrix.sum(0) + matrix.sum(1)  # 2tp + fp + fn per class
    present = np.union1d(np.unique(labels), np.unique(predictions)).astype(np.int64)
    per_class = np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
    return float(per_class[present].mean())


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation (multiclass R_K form; the usual MCC for two classes), 0 if undefined."""
    matrix = _confusion(labels, predictions).astype(np.float64)
    t = matrix.sum(1)  # true occurrences per class
    p = matrix.sum(0)  # predicted occurrences per class
    c, s = np.trace(matrix), matrix.sum()
    numerator = c * s - t @ p
    denominator = np.sqrt(s * s - p @ p) * np.sqrt(s * s - t @ t)
    return float(numerator / denominator) if denominator > 0 else 0.0


def pearson(labels, predictions) -> float:
    """Pearson correlation; NaN when either side is constant."""
    x, y = _pair(labels, predictions)
    x, y = x.astype(np.float64) - x.mean(), y.astype(np.float64) - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else float("nan")


def _ranks(values):
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # start of each run of equal values in sorted order
    starts = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
    run_id = np.cumsum(starts) - 1
    run_start = np.flatnonzero(starts)
    run_end = np.append(run_start[1:], len(values))  # exclusive
    mean_rank = (run_start + run_end + 1) / 2.0  # mean of run_start+1 .. run_end
    ranks = np.empty(len(values), np.float64)
    ranks[order] = mean_rank[run_id]
    return ranks


def spearman(labels, predictions) -> float:
    """Spearman rank correlation (Pearson on tie-averaged ranks)."""
    x, y = _pair(labels, predictions)
    return pearson(_ranks(x.astype(np.float64)), _ranks(y.astype(np.float64)))


def classification_metrics(labels, predictions, num_classes=2) -> dict:
    """accuracy, f1 (F1 of class 1 for two classes, macro F1 otherwise) and matthews_corrcoef."""
    return {
        "accuracy": accuracy(labels, predictions),
        "f1": f1_score(labels, predictions, average="binary" if num_classes == 2 else "macro"),
        "matthews_corrcoef": matthews_corrcoef(labels, predictions),
    }


def regression_metrics(labels, predictions) -> dict:
    """pearson, spearman and mse of real-valued predictions."""
    labels, predictions = _pair(labels, predictions)
    return {
        "pearson": pearson(labels, predictions),
        "spearman": spearman(labels, predictions),
        "mse": float(np.mean((labels.astype(np.float64) - predictions) ** 2)),
    }
