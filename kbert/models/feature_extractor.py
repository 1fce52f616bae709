"""Feature-based BERT: hidden states of chosen layers from a frozen backbone, for other models.

The paper's feature-based experiment (CoNLL NER) feeds the concatenation of the last four
layers' hidden states into a BiLSTM and never updates BERT. `BertFeatureExtractor` is that
frozen front end as a Keras model; `BertFeatureClassifier` puts a small trainable BiLSTM
classifier on top of it for sentence (or pair) classification.
"""

import keras

from kbert.config_checks import whole_number
from kbert.layers.dropout import Dropout
from kbert.models.backbone import BertBackbone
from kbert.models.sentence_task import BertSentenceTask
from kbert.models.task import BertTask, classification_defaults
from kbert.text.preprocessor import BertPreprocessor

COMBINES = ("concat", "mean", "sum")


@keras.saving.register_keras_serializable(package="kbert")
class BertFeatureExtractor(BertTask):
    """Frozen BERT → the hidden states of `layers`, combined.

    `layers` index the backbone's `hidden_states` list (num_layers + 1 entries: 0 is the
    embedding output, -1 the last block). `combine` is "concat" (the paper's choice: features of
    size len(layers) * hidden), "mean" or "sum" (size hidden).

    Inputs: the backbone's dict. Output: float [batch, seq, features] (padding positions hold
    values too; mask them with `padding_mask`).

    The extractor is frozen for good (`trainable` is always False, whatever an enclosing model
    sets) and BERT always runs in inference mode (no dropout), also inside a model being fit.
    A backbone built without `output_hidden_states` is copied into
    one built with it (same weights).
    """

    serving_task = "feature_extractor"
    preprocessor_cls = BertPreprocessor

    def __init__(self, backbone: BertBackbone, layers=(-4, -3, -2, -1), combine="concat",
                 **kwargs):
        if combine not in COMBINES:
            raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}.")
        layers = tuple(int(i) for i in ([layers] if isinstance(layers, int) else layers))
        count = backbone.config.num_layers + 1
        if not layers or any(not -count <= i < count for i in layers):
            raise ValueError(f"layers must index the {count} hidden states "
                             f"(-{count}..{count - 1}), got {layers}.")
        if not backbone.output_hidden_states:
            source = backbone
            backbone = BertBackbone.from_config(
                {**source.get_config(), "output_hidden_states": True})
            backbone.set_weights(source.get_weights())

        # === Layers ===
        merge = {"concat": keras.layers.Concatenate(axis=-1, name="combine_layers"),
                 "mean": keras.layers.Average(name="combine_layers"),
                 "sum": keras.layers.Add(name="combine_layers")}[combine]

        # === Functional graph ===
        inputs = dict(backbone.input)
        hidden_states = backbone(inputs)["hidden_states"]
        chosen = [hidden_states[i] for i in layers]
        outputs = merge(chosen) if len(chosen) > 1 else chosen[0]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self._freeze()
        self.backbone = backbone
        self.feature_layers = layers
        self.combine = combine

    @property
    def trainable(self):
        return False

    @trainable.setter
    def trainable(self, value):
        # Always frozen, whatever is asked (an enclosing model may set `trainable = True` on all
        # its layers); fine-tune the backbone itself to train BERT.
        self._freeze()

    def _freeze(self):
        # Every sublayer explicitly: a Functional model built with trainable=False does not pass
        # it on, and on the TF backend `layer.trainable = False` is skipped when the layer
        # already reports False (attribute assignment short-circuits on an identical value).
        for layer in self._flatten_layers(include_self=False, recursive=True):
            keras.layers.Layer.trainable.fset(layer, False)
        keras.layers.Layer.trainable.fset(self, False)

    @property
    def feature_size(self):
        hidden = self.backbone.config.hidden_size
        return hidden * len(self.feature_layers) if self.combine == "concat" else hidden

    def call(self, inputs, training=None, mask=None):
        # Frozen means frozen: no dropout in BERT even when the consumer trains.
        return super().call(inputs, training=False, mask=mask)

    def task_config(self):
        return {"layers": list(self.feature_layers), "combine": self.combine}


@keras.saving.register_keras_serializable(package="kbert")
class PaddingToMask(keras.layers.Layer):
    """int `padding_mask` [batch, seq] → the boolean mask Keras' recurrent layers take."""

    def call(self, padding_mask):
        return keras.ops.cast(padding_mask, "bool")

    def compute_output_spec(self, padding_mask):
        return keras.KerasTensor(padding_mask.shape, dtype="bool")


@keras.saving.register_keras_serializable(package="kbert")
class BertFeatureClassifier(BertSentenceTask):
    """The paper's feature-based use for sentence (or pair) classification: a small classifier
    trained on frozen BERT features. The chosen layers' hidden states (`BertFeatureExtractor`)
    feed a BiLSTM over the masked sequence → dropout → dense logits [batch, num_classes]. Only
    the BiLSTM and the dense layer train. `sentence_pair`: whether it reads pairs, recorded by
    a `fit` on raw text (`BertSentenceTask`).

    >>> model = BertFeatureClassifier(BertBackbone(BertConfig.preset("tiny")), num_classes=2,
    ...                               layers=(-2, -1))  # tiny has 2 blocks: 3 hidden states
    """

    serving_task = "classifier"
    preprocessor_cls = BertPreprocessor

    def __init__(self, backbone: BertBackbone, num_classes=2, layers=(-4, -3, -2, -1),
                 lstm_units=64, dropout=0.1, sentence_pair=None, **kwargs):
        num_classes = whole_number("num_classes", num_classes, 2)
        # === Layers ===
        extractor = BertFeatureExtractor(backbone, layers=layers, name="feature_extractor")
        to_mask = PaddingToMask(name="to_mask")
        lstm = keras.layers.Bidirectional(keras.layers.LSTM(lstm_units), name="bilstm")
        dropout_layer = Dropout(dropout, name="classifier_dropout")
        head = keras.layers.Dense(num_classes, name="classifier")

        # === Functional graph ===
        inputs = dict(extractor.backbone.input)
        encoded = lstm(extractor(inputs), mask=to_mask(inputs["padding_mask"]))
        outputs = head(dropout_layer(encoded))
        super().__init__(inputs=inputs, outputs=outputs, sentence_pair=sentence_pair, **kwargs)

        # === Config ===
        self.backbone = extractor.backbone
        self.num_classes = num_classes
        self.feature_layers = extractor.feature_layers
        self.lstm_units = lstm_units
        self.dropout = dropout
        self.feature_extractor = extractor

    @property
    def label_classes(self):
        return self.num_classes

    def compile(self, optimizer="auto", loss=None, metrics=None, **kwargs):
        """Compiles with cross-entropy and `accuracy` unless others are given."""
        loss, metrics = classification_defaults(loss, metrics)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def task_config(self):
        return {"num_classes": self.num_classes, "layers": list(self.feature_layers),
                "lstm_units": self.lstm_units, "dropout": self.dropout,
                **super().task_config()}
