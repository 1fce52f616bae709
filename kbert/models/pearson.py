"""`Pearson`: the Pearson correlation of everything a metric has seen, as `fit` and `evaluate`
report it for regression.

Keras' `PearsonCorrelation` averages one correlation per batch: not the dataset's correlation
(GLUE's STS-B score), and NaN as soon as one batch holds equal labels (a batch of one, a run of
equal scores), after which the epoch's number stays NaN. This metric keeps the running means,
sums of squares and co-moment of all batches instead (Chan, Golub and LeVeque's pairwise
update), so its result equals `kbert.evaluation.pearson` on the same predictions.
"""

import keras
from keras import ops

STATES = ("count", "mean_true", "mean_pred", "m2_true", "m2_pred", "comoment")


@keras.saving.register_keras_serializable(package="kbert")
class Pearson(keras.metrics.Metric):
    """Pearson correlation over all updates since the last reset (NaN while either side is
    constant). `sample_weight` weighs each example, as a frequency would."""

    def __init__(self, name="pearson", dtype=None):
        super().__init__(name=name, dtype=dtype)
        for state in STATES:
            setattr(self, state, self.add_variable(shape=(), initializer="zeros",
                                                   dtype="float32", name=state))

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.reshape(ops.cast(y_true, "float32"), [-1])
        y_pred = ops.reshape(ops.cast(y_pred, "float32"), [-1])
        weight = ops.ones_like(y_pred)
        if sample_weight is not None:  # [batch], [batch, 1] or a scalar
            weight = weight * ops.reshape(ops.cast(sample_weight, "float32"), [-1])
        n_b = ops.sum(weight)
        mean = lambda v: ops.divide_no_nan(ops.sum(weight * v), n_b)
        mean_true_b, mean_pred_b = mean(y_true), mean(y_pred)
        d_true, d_pred = y_true - mean_true_b, y_pred - mean_pred_b
        n_a = self.count
        n = n_a + n_b
        share = ops.divide_no_nan(n_b, n)  # of the new batch in the merged means
        cross = ops.divide_no_nan(n_a * n_b, n)  # weighs the products of the means' gaps
        gap_true, gap_pred = mean_true_b - self.mean_true, mean_pred_b - self.mean_pred
        self.m2_true.assign(self.m2_true + ops.sum(weight * d_true * d_true)
                            + gap_true * gap_true * cross)
        self.m2_pred.assign(self.m2_pred + ops.sum(weight * d_pred * d_pred)
                            + gap_pred * gap_pred * cross)
        self.comoment.assign(self.comoment + ops.sum(weight * d_true * d_pred)
                             + gap_true * gap_pred * cross)
        self.mean_true.assign(self.mean_true + gap_true * share)
        self.mean_pred.assign(self.mean_pred + gap_pred * share)
        self.count.assign(n)

    def result(self):
        return self.comoment / ops.sqrt(self.m2_true * self.m2_pred)

    def reset_state(self):
        for state in STATES:
            getattr(self, state).assign(0.0)
