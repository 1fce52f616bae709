import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from kbert.evaluation import (
    accuracy,
    classification_metrics,
    f1_score,
    matthews_corrcoef,
    pearson,
    regression_metrics,
    spearman,
)

rng = np.random.default_rng(0)
BINARY = (rng.integers(0, 2, 200), rng.integers(0, 2, 200))
MULTI = (rng.integers(0, 3, 300), rng.integers(0, 3, 300))
SCORES = (rng.normal(size=150), None)
SCORES = (SCORES[0], SCORES[0] + rng.normal(scale=0.8, size=150))
# heavy ties, as in STS-B's 0-5 labels against rounded predictions
TIED = (rng.integers(0, 6, 120).astype(float), np.round(rng.uniform(0, 5, 120)))


@pytest.mark.parametrize("labels, preds", [BINARY, MULTI])
def test_accuracy_and_mcc_match_sklearn(labels, preds):
    assert accuracy(labels, preds) == pytest.approx(sklearn.metrics.accuracy_score(labels, preds))
    assert matthews_corrcoef(labels, preds) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, preds), abs=1e-12)


def test_f1_matches_sklearn():
    labels, preds = BINARY
    assert f1_score(labels, preds) == pytest.approx(sklearn.metrics.f1_score(labels, preds))
    labels, preds = MULTI
    for average in ("macro", "micro"):
        assert f1_score(labels, preds, average=average) == pytest.approx(
            sklearn.metrics.f1_score(labels, preds, average=average))


def test_degenerate_cases_match_sklearn():
    labels, constant = np.array([0, 1, 1, 0]), np.zeros(4, int)
    assert matthews_corrcoef(labels, constant) == sklearn.metrics.matthews_corrcoef(labels,
                                                                                  constant)
    assert f1_score(labels, constant) == sklearn.metrics.f1_score(labels, constant,
                                                                 zero_division=0)
    assert matthews_corrcoef(labels, labels) == pytest.approx(1.0)
    assert matthews_corrcoef(labels, 1 - labels) == pytest.approx(-1.0)


@pytest.mark.parametrize("labels, preds", [SCORES, TIED])
def test_correlations_match_scipy(labels, preds):
    assert pearson(labels, preds) == pytest.approx(scipy.stats.pearsonr(labels, preds)[0],
                                                   abs=1e-12)
    assert spearman(labels, preds) == pytest.approx(scipy.stats.spearmanr(labels, preds)[0],
                                                    abs=1e-12)


def test_metric_dicts_use_standard_names():
    assert set(classification_metrics(*BINARY)) == {"accuracy", "f1", "matthews_corrcoef"}
    assert set(regression_metrics(*SCORES)) == {"pearson", "spearman", "mse"}
    with pytest.raises(ValueError, match="length"):
        accuracy([0, 1], [0])
