"""`BertClassifier`: sentence and sentence-pair classification (or regression) on `[CLS]`."""

import keras

from kbert.config_checks import whole_number
from kbert.convert.task_heads import CheckpointHeads
from kbert.layers.dropout import Dropout
from kbert.models.backbone import BertBackbone
from kbert.models.pearson import Pearson
from kbert.models.sentence_task import BertSentenceTask
from kbert.models.task import classification_defaults
from kbert.text.preprocessor import BertPreprocessor


@keras.saving.register_keras_serializable(package="kbert")
class BertClassifier(BertSentenceTask):
    """The paper's GLUE model: pooled `[CLS]` output → dropout → dense.

    Inputs: the backbone's dict (`token_ids`, `segment_ids`, `padding_mask`, int32 [batch, seq]).
    A sentence pair is one input packed as `[CLS] A [SEP] B [SEP]` by `BertPreprocessor`, so the
    model is the same for single sentences and pairs.

    Output: logits [batch, num_classes]. `num_classes=1` makes a regression model (STS-B): the
    output [batch, 1] is the predicted score.

    `compile()` defaults: sparse categorical cross-entropy on the logits and `accuracy` for
    classification; mean squared error with `mse` and `pearson` (over all the examples seen,
    `kbert.models.pearson.Pearson`, not Keras' mean of per-batch correlations) for regression.

    `sentence_pair`: whether it reads pairs, recorded by a `fit` on raw text
    (`BertSentenceTask`).

    >>> model = BertClassifier(BertBackbone(BertConfig.preset("tiny")), num_classes=3)
    """

    serving_task = "classifier"
    preprocessor_cls = BertPreprocessor
    checkpoint_heads = CheckpointHeads("classifier", "BertForSequenceClassification",
                                       google="run_classifier.py",
                                       keras_hub="BertTextClassifier", labelled=True)

    def __init__(self, backbone: BertBackbone, num_classes=2, dropout=0.1, sentence_pair=None,
                 **kwargs):
        num_classes = whole_number("num_classes", num_classes, 1,
                                   "a positive integer (1 = regression)")
        # === Layers ===
        dropout_layer = Dropout(dropout, dtype=backbone.dtype_policy,
                                             name="classifier_dropout")
        head = keras.layers.Dense(
            num_classes, dtype=backbone.dtype_policy, name="classifier",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=backbone.config.initializer_range))

        # === Functional graph ===
        inputs = dict(backbone.input)
        pooled = backbone(inputs)["pooled_output"]
        outputs = head(dropout_layer(pooled))
        super().__init__(inputs=inputs, outputs=outputs, sentence_pair=sentence_pair, **kwargs)

        # === Config ===
        self.backbone = backbone
        self.num_classes = num_classes
        self.dropout = dropout
        self.classifier_dropout = dropout_layer
        self.classifier = head

    @property
    def is_regression(self):
        return self.num_classes == 1

    @property
    def label_classes(self):
        return None if self.is_regression else self.num_classes

    def compile(self, optimizer="auto", loss=None, metrics=None, **kwargs):
        """Compiles with the task's standard loss and metrics unless others are given."""
        if not self.is_regression:
            loss, metrics = classification_defaults(loss, metrics)
        if loss is None:
            loss = keras.losses.MeanSquaredError()
        if metrics is None:
            metrics = [keras.metrics.MeanSquaredError("mse"),
                       Pearson()]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def task_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout,
                **super().task_config()}
