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
from kbert.models.classifier import BertSentenceTask, classification_defaults
from kbert.models.task import BertTask
from kbert.text.preprocessor import BertPreprocessor

COMBINES = ("concat", "mean", "sum")


@keras.saving.register_keras_serializable(package="kbert")
class BertFeatureExtractor(BertTask):
    """Frozen BERT as a feature front end: the hidden states of chosen layers, combined.

    The paper's feature-based use (CoNLL NER) feeds other models the hidden states of BERT's
    last layers and never updates BERT. The extractor is frozen for good (`trainable` is
    always False, whatever an enclosing model sets) and BERT always runs in inference mode (no
    dropout), also inside a model being fit. A backbone built without `output_hidden_states`
    is copied into one built with it (same weights).

    Args:
        backbone: a `BertBackbone`.
        layers: int or ints. Indices into the backbone's `hidden_states` (num_layers + 1
            entries: 0 is the embedding output, -1 the last block's).
        combine: "concat" (the paper's choice: features of size len(layers) * hidden),
            "mean" or "sum" (size hidden).
        preprocessor: optional; a `BertPreprocessor`, with which `predict` takes raw text.
        **kwargs: `name`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict: `token_ids`, `segment_ids` and `padding_mask`, int32
            [batch, seq].

    Returns:
        The features, float [batch, seq, feature_size]. Padding positions hold values too:
        mask them with `padding_mask`.

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> extractor = kbert.BertFeatureExtractor(backbone, layers=(-2, -1))
        >>> ids = np.array([[101, 7592, 2088, 102]])  # [CLS] hello world [SEP]
        >>> features = extractor({"token_ids": ids, "segment_ids": np.zeros_like(ids),
        ...                       "padding_mask": np.ones_like(ids)})
        >>> tuple(features.shape), extractor.feature_size
        ((1, 4, 256), 256)
        >>> extractor.trainable, len(extractor.trainable_weights)
        (False, 0)
    """

    serving_kind = "feature_extractor"
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
        """Always False: the extractor stays frozen; fine-tune the backbone to train BERT."""
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
        """The size of each token's features (the output's last axis)."""
        hidden = self.backbone.config.hidden_size
        return hidden * len(self.feature_layers) if self.combine == "concat" else hidden

    def call(self, inputs, training=None, mask=None):
        # Frozen means frozen: no dropout in BERT even when the consumer trains.
        return super().call(inputs, training=False, mask=mask)

    def task_config(self):
        return {"layers": list(self.feature_layers), "combine": self.combine}


@keras.saving.register_keras_serializable(package="kbert")
class PaddingToMask(keras.layers.Layer):
    """The int `padding_mask` [batch, seq] as the boolean mask Keras' recurrent layers take.

    Call arguments:
        padding_mask: int [batch, seq], 1 on real tokens.

    Returns:
        bool [batch, seq].

    Examples:
        >>> import numpy as np
        >>> from kbert.models.feature_extractor import PaddingToMask
        >>> PaddingToMask()(np.array([[1, 1, 0]])).numpy().tolist()
        [[True, True, False]]
    """

    def call(self, padding_mask):
        return keras.ops.cast(padding_mask, "bool")

    def compute_output_spec(self, padding_mask):
        return keras.KerasTensor(padding_mask.shape, dtype="bool")


@keras.saving.register_keras_serializable(package="kbert")
class BertFeatureClassifier(BertSentenceTask):
    """Sentence (or pair) classification on frozen BERT features, the paper's feature-based use.

    The chosen layers' hidden states (`BertFeatureExtractor`, concatenated) feed a BiLSTM over
    the masked sequence → dropout → dense logits. Only the BiLSTM and the dense layer train.
    `compile()` defaults: cross-entropy from the logits and `accuracy`.

    Args:
        backbone: a `BertBackbone`; it stays frozen.
        num_classes: int, at least 2. The number of classes.
        layers: ints. Indices into the backbone's `hidden_states` (num_layers + 1 entries:
            0 is the embedding output, -1 the last block's).
        lstm_units: int. The BiLSTM's units in each direction.
        dropout: float. The dropout rate before the dense layer.
        sentence_pair: whether the model reads pairs (None: unknown), recorded by a `fit` on
            raw text and saved with the model (as for `BertClassifier`).
        preprocessor: optional; a `BertPreprocessor`, with which `fit`, `evaluate` and
            `predict` take raw text.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict: `token_ids`, `segment_ids` and `padding_mask`, int32
            [batch, seq].

    Returns:
        The logits [batch, num_classes].

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> model = kbert.BertFeatureClassifier(backbone, num_classes=2, layers=(-2, -1),
        ...                                     lstm_units=8)  # tiny has 3 hidden states
        >>> ids = np.array([[101, 7592, 2088, 102]])
        >>> logits = model({"token_ids": ids, "segment_ids": np.zeros_like(ids),
        ...                 "padding_mask": np.ones_like(ids)})
        >>> tuple(logits.shape)
        (1, 2)
        >>> len(model.trainable_weights)  # the BiLSTM's 2 x 3 and the dense layer's 2
        8
    """

    serving_kind = "classifier"
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
        """How many classes the labels index: `num_classes`."""
        return self.num_classes

    def compile(self, optimizer="auto", loss=None, metrics=None, **kwargs):
        """Keras' `compile`, with cross-entropy and `accuracy` unless others are given.

        Args:
            optimizer: a Keras optimizer, or "auto" (`BertTask.compile`: Adam at 1e-3, since
                only the new head trains).
            loss: default: cross-entropy from the logits.
            metrics: default: `accuracy`.
            **kwargs: `BertTask.compile`'s arguments.
        """
        loss, metrics = classification_defaults(loss, metrics)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def task_config(self):
        return {"num_classes": self.num_classes, "layers": list(self.feature_layers),
                "lstm_units": self.lstm_units, "dropout": self.dropout,
                **super().task_config()}
