"""`BertClassifier`: sentence and sentence-pair classification (or regression) on `[CLS]`."""

import keras

from kbert.config_checks import whole_number
from kbert.convert.task_heads import CheckpointHeads
from kbert.layers.dropout import Dropout
from kbert.models.backbone import BertBackbone
from kbert.models.pearson import Pearson
from kbert.models.task import BertTask
from kbert.models.task_inputs import text_pairs
from kbert.text.preprocessor import BertPreprocessor


def classification_defaults(loss=None, metrics=None):
    """The default loss and metrics of a head that returns class logits.

    Args:
        loss: the caller's loss, or None for sparse categorical cross-entropy from the logits.
        metrics: the caller's metrics, or None for `[SparseCategoricalAccuracy("accuracy")]`.

    Returns:
        `(loss, metrics)`.

    Examples:
        >>> from kbert.models.classifier import classification_defaults
        >>> loss, metrics = classification_defaults()
        >>> type(loss).__name__, [m.name for m in metrics]
        ('SparseCategoricalCrossentropy', ['accuracy'])
    """
    if loss is None:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if metrics is None:
        metrics = [keras.metrics.SparseCategoricalAccuracy("accuracy")]
    return loss, metrics


class BertSentenceTask(BertTask):
    """Base of the sentence classifiers. `sentence_pair` says whether the model reads pairs
    (None: unknown); a `fit` on raw text sets it to the form it was given, once the input passed
    its checks and before training (so checkpoints saved during it keep it); it is saved with
    the model, and `export_saved_model` serves that form unless told otherwise."""

    def __init__(self, inputs, outputs, sentence_pair=None, **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.sentence_pair = None if sentence_pair is None else bool(sentence_pair)

    def task_config(self):
        return {"sentence_pair": self.sentence_pair}

    def _fitting_on(self, text):
        if text is not None:
            self.sentence_pair = text_pairs(text)


@keras.saving.register_keras_serializable(package="kbert")
class BertClassifier(BertSentenceTask):
    """Sentence and sentence-pair classification, or regression: the paper's GLUE model.

    The pooled `[CLS]` output → dropout → dense. A sentence pair is one input, packed as
    `[CLS] A [SEP] B [SEP]` by a `BertPreprocessor`, so the model is the same for single
    sentences and pairs. `compile()` defaults: sparse categorical cross-entropy on the logits
    and `accuracy` for classification; mean squared error with the metrics `mse` and `pearson`
    (over all the examples seen, `kbert.models.pearson.Pearson`, not Keras' mean of per-batch
    correlations) for regression.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int. The number of classes; 1 makes a regression model (STS-B) whose
            output is the predicted score.
        dropout: float. The dropout rate on the pooled output.
        sentence_pair: whether the model reads pairs (None: unknown). A `fit` on raw text
            records the form it was given; it is saved with the model, and
            `kbert.export_saved_model` serves that form unless told otherwise.
        preprocessor: optional; a `BertPreprocessor`, with which `fit`, `evaluate` and
            `predict` take raw text: strings, or a tuple `(texts_a, texts_b)` of pairs.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict: `token_ids`, `segment_ids` and `padding_mask`, int32
            [batch, seq].

    Returns:
        The logits [batch, num_classes] (with `num_classes=1`, the scores [batch, 1]).

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> model = kbert.BertClassifier(backbone, num_classes=3)
        >>> ids = np.array([[101, 7592, 102, 2088, 102]])  # [CLS] hello [SEP] world [SEP]
        >>> logits = model({"token_ids": ids, "segment_ids": np.array([[0, 0, 0, 1, 1]]),
        ...                 "padding_mask": np.ones_like(ids)})
        >>> tuple(logits.shape)
        (1, 3)

        Raw text, with a preprocessor:

        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=16)
        >>> model = kbert.BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
        >>> model.predict((["A man plays a guitar."], ["Someone makes music."]), verbose=0).shape
        (1, 2)
    """

    serving_kind = "classifier"
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
        """Whether the model predicts one score (`num_classes=1`)."""
        return self.num_classes == 1

    @property
    def label_classes(self):
        """How many classes the labels index; None for regression."""
        return None if self.is_regression else self.num_classes

    def compile(self, optimizer="auto", loss=None, metrics=None, **kwargs):
        """Keras' `compile`, with the task's standard loss and metrics unless others are given.

        Args:
            optimizer: a Keras optimizer, or "auto" (`BertTask.compile`).
            loss: default: cross-entropy from the logits; mean squared error for regression.
            metrics: default: `accuracy`; `mse` and `pearson` for regression.
            **kwargs: `BertTask.compile`'s arguments (e.g. `jit_compile`).
        """
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
