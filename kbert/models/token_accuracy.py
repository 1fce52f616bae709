"""`TokenAccuracy`: the weighted share of tokens a tagger labels right, over every token seen,
as `fit` and `evaluate` report it for a `BertTokenClassifier`.

Keras' `SparseCategoricalAccuracy` with [batch, seq] weights averages each row over its length
first (`reduce_to_samplewise_values`), so a token counts 1/seq. That cancels when every batch
has one length, as keras-hub's padded batches do; kbert cuts each raw-text batch to its longest
row, and there the epoch's accuracy changed with the batch size (a tiny tagger on 64 CoNLL dev
sentences: 0.3639 in one batch, 0.3458 a sentence a batch). Here the correct tokens' weights and
all tokens' weights are summed as they are.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kbert")
class TokenAccuracy(keras.metrics.Metric):
    """Sum of `sample_weight` where argmax(logits) equals the label, over the sum of
    `sample_weight` (1 a token without weights), since the last reset."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.correct = self.add_variable(shape=(), initializer="zeros", dtype="float32",
                                         name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", dtype="float32",
                                       name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")
        hits = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), labels), "float32")
        weight = ops.ones_like(hits)
        if sample_weight is not None:
            weight = weight * ops.reshape(ops.cast(sample_weight, "float32"),
                                          ops.shape(hits))
        self.correct.assign(self.correct + ops.sum(hits * weight))
        self.total.assign(self.total + ops.sum(weight))

    def result(self):
        return ops.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)
