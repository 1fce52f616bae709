"""`Pearson`, the regression metric `fit` reports: the correlation of all the batches seen, equal
to scipy's `pearsonr` on them at once (Keras' `PearsonCorrelation` averaged per-batch values and
turned NaN on a batch of equal labels)."""

import keras
import numpy as np
import pytest
import scipy.stats

from kbert.models.pearson import Pearson


def _batches(rng, sizes):
    labels = [rng.uniform(0, 5, n).round(1) for n in sizes]
    return [(y, (y + rng.normal(0, 1.5, y.shape))[:, None]) for y in labels]


@pytest.mark.parametrize("sizes", [(32, 32, 32), (7, 1, 50, 3), (1, 1, 1, 1, 1, 1)])
def test_pearson_of_every_batch_seen_is_scipys(sizes):
    batches = _batches(np.random.default_rng(len(sizes)), sizes)
    metric = Pearson()
    for labels, predictions in batches:
        metric.update_state(labels, predictions)
    labels = np.concatenate([b[0] for b in batches])
    predictions = np.concatenate([b[1][:, 0] for b in batches])
    assert float(metric.result()) == pytest.approx(
        scipy.stats.pearsonr(labels, predictions)[0], abs=1e-5)
    metric.reset_state()
    metric.update_state(*batches[-1])
    metric.update_state(*batches[-1])  # the same examples twice: the same correlation
    if sizes[-1] > 1:
        assert float(metric.result()) == pytest.approx(
            scipy.stats.pearsonr(batches[-1][0], batches[-1][1][:, 0])[0], abs=1e-5)


def test_a_batch_of_equal_labels_does_not_spoil_the_rest():
    rng = np.random.default_rng(0)
    labels = np.concatenate([np.full(8, 2.0), rng.uniform(0, 5, 40)])
    predictions = labels + rng.normal(0, 1, labels.shape)
    metric, keras_metric = Pearson(), keras.metrics.PearsonCorrelation()
    for part in (slice(0, 8), slice(8, 48)):
        metric.update_state(labels[part], predictions[part])
        keras_metric.update_state(labels[part], predictions[part])
    assert float(metric.result()) == pytest.approx(scipy.stats.pearsonr(labels, predictions)[0],
                                                   abs=1e-5)
    assert np.isnan(float(keras_metric.result()))  # what the progress line showed


def test_sample_weights_count_as_repeats():
    rng = np.random.default_rng(1)
    labels, predictions = rng.uniform(0, 5, 20), rng.uniform(0, 5, 20)
    weights = rng.integers(0, 4, 20)
    metric = Pearson()
    metric.update_state(labels[:9], predictions[:9], weights[:9])
    metric.update_state(labels[9:], predictions[9:], weights[9:])
    repeated = (np.repeat(labels, weights), np.repeat(predictions, weights))
    assert float(metric.result()) == pytest.approx(scipy.stats.pearsonr(*repeated)[0],
                                                   abs=1e-5)


def test_undefined_while_a_side_is_constant():
    metric = Pearson()
    metric.update_state(np.array([1.0, 1.0, 1.0]), np.array([0.2, 0.5, 0.9]))
    assert np.isnan(float(metric.result()))


def test_a_regression_model_evaluates_to_the_pearson_of_its_predictions():
    """`BertClassifier(num_classes=1).compile()` reports this metric: `evaluate` in batches of
    4, the first with equal labels, gives the correlation of all its predictions
    (`kbert.evaluation.pearson`, what metrics.json reports)."""
    from kbert.evaluation.classification import pearson
    from kbert.models import BertBackbone, BertClassifier
    from tests.spans.helpers import tiny_config

    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(tiny_config()), num_classes=1)
    model.compile()
    rng = np.random.default_rng(2)
    ids = rng.integers(5, 40, (24, 8)).astype("int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
              "padding_mask": np.ones_like(ids)}
    labels = np.concatenate([np.full(4, 3.0), rng.uniform(0, 5, 20)]).astype("float32")
    reported = model.evaluate(inputs, labels, batch_size=4, verbose=0, return_dict=True)
    predictions = model.predict(inputs, batch_size=4, verbose=0)[:, 0]
    assert reported["pearson"] == pytest.approx(pearson(labels, predictions), abs=1e-4)
