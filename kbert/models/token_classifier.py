"""`BertTokenClassifier`: one label per token (CoNLL-2003 NER), fine-tuned or feature-based."""

import keras
import numpy as np

from kbert.config_checks import whole_number
from kbert.convert.task_heads import CheckpointHeads
from kbert.layers.dropout import Dropout
from kbert.models.backbone import BertBackbone
from kbert.models.input_limits import check_class_labels
from kbert.models.task import BertTask
from kbert.models.task_inputs import is_number, is_stream
from kbert.models.feature_extractor import BertFeatureExtractor, PaddingToMask
from kbert.models.token_accuracy import TokenAccuracy
from kbert.text.token_preprocessor import BertTokenPreprocessor


@keras.saving.register_keras_serializable(package="kbert")
class BertTokenClassifier(BertTask):
    """Token tagging, one label per token (the paper's CoNLL-2003 NER model).

    Fine-tuning (the default): final hidden states → dropout → dense; all of BERT trains.
    Feature-based (`feature_layers`): BERT is frozen, the chosen layers' hidden states are
    concatenated (`BertFeatureExtractor`) and a BiLSTM, masked by `padding_mask`, feeds the
    dense layer; only the BiLSTM and the dense layer train. Labels go on the first sub-token
    of each word (`BertTokenPreprocessor` aligns them): fit with sample weights 1 there and 0
    elsewhere, so the other sub-tokens, specials and padding count in neither the loss nor the
    metrics. `compile()` defaults: cross-entropy averaged over the weighted tokens, and
    `accuracy` over all weighted tokens seen (`TokenAccuracy`).
    `fit(class_weight={tag id: weight})` weighs each token by its tag, times its other weights.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int, at least 2. The number of tags; may be omitted with `label_names`.
        dropout: float. The dropout rate before the dense layer.
        feature_layers: None to fine-tune, or indices into the backbone's `hidden_states`
            for the feature-based model, e.g. (-4, -3, -2, -1), the paper's best
            feature-based setting.
        lstm_units: int. The feature-based model's BiLSTM units in each direction.
        label_names: optional; the tags' names in id order, saved with the model, so a
            loaded model can decode its own predictions. It fixes `num_classes` when that is
            omitted.
        preprocessor: optional; a `BertTokenPreprocessor`, with which `fit`, `evaluate` and
            `predict` take words (one list per sentence) and word labels.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict: `token_ids`, `segment_ids` and `padding_mask`, int32
            [batch, seq].

    Returns:
        The logits [batch, seq, num_classes].

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> model = kbert.BertTokenClassifier(backbone, label_names=["O", "B-PER", "I-PER"])
        >>> ids = np.array([[101, 7592, 2088, 102]])  # [CLS] hello world [SEP]
        >>> inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
        ...           "padding_mask": np.ones_like(ids)}
        >>> model.num_classes, tuple(model(inputs).shape)
        (3, (1, 4, 3))

        Feature-based, on the last two layers:

        >>> model = kbert.BertTokenClassifier(backbone, num_classes=3, feature_layers=(-2, -1),
        ...                                   lstm_units=8)
        >>> model.is_feature_based, tuple(model(inputs).shape)
        (True, (1, 4, 3))

        Words, with a preprocessor:

        >>> model = kbert.BertTokenClassifier.from_pretrained(
        ...     "tiny", label_names=["O", "B-PER", "I-PER"], sequence_length=16)
        >>> type(model.preprocessor).__name__
        'BertTokenPreprocessor'
        >>> model.predict([["Ada", "Lovelace", "wrote", "it"]], verbose=0).shape
        (1, 16, 3)
    """

    serving_kind = "token_classifier"
    preprocessor_cls = BertTokenPreprocessor
    checkpoint_heads = CheckpointHeads("classifier", "BertForTokenClassification", labelled=True)

    def __init__(self, backbone: BertBackbone, num_classes=None, dropout=0.1,
                 feature_layers=None, lstm_units=128, label_names=None, **kwargs):
        if label_names is not None:
            label_names = [str(n) for n in label_names]
            if num_classes is None:
                num_classes = len(label_names)
            elif num_classes != len(label_names):
                raise ValueError(f"num_classes={num_classes} but {len(label_names)} "
                                 "label_names.")
        num_classes = whole_number("num_classes", num_classes, 2)
        # === Layers ===
        initializer = keras.initializers.TruncatedNormal(stddev=backbone.config.initializer_range)
        extractor = lstm = to_mask = None
        if feature_layers is not None:
            extractor = BertFeatureExtractor(backbone, layers=feature_layers,
                                             name="feature_extractor")
            backbone = extractor.backbone  # the one returning hidden states
            to_mask = PaddingToMask(name="to_mask")
            lstm = keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True), name="bilstm")
        dropout_layer = Dropout(dropout, dtype=backbone.dtype_policy,
                                             name="classifier_dropout")
        head = keras.layers.Dense(num_classes, dtype=backbone.dtype_policy, name="classifier",
                                  kernel_initializer=initializer)

        # === Functional graph ===
        inputs = dict(backbone.input)
        if extractor is None:
            x = backbone(inputs)["sequence_output"]
        else:
            x = lstm(extractor(inputs), mask=to_mask(inputs["padding_mask"]))
        outputs = head(dropout_layer(x))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.backbone = backbone
        self.num_classes = num_classes
        self.dropout = dropout
        self.feature_layers = None if feature_layers is None else tuple(
            int(i) for i in feature_layers)
        self.lstm_units = lstm_units
        self.label_names = label_names
        self.feature_extractor = extractor
        self.bilstm = lstm
        self.classifier_dropout = dropout_layer
        self.classifier = head

    @property
    def is_feature_based(self):
        """Whether BERT is frozen under a BiLSTM (`feature_layers` was given)."""
        return self.feature_layers is not None

    def _check_labels(self, y):
        """Word labels (one list per sentence) or packed [batch, seq] labels: each a tag id."""
        if y is None or isinstance(y, dict) or hasattr(y, "element_spec"):
            return
        for n, row in enumerate(y):
            row = np.asarray(row).reshape(-1)
            try:
                check_class_labels(row, self.num_classes)
            except ValueError as error:
                hint = (" Hugging Face's -100 marks a token to skip; here such a token takes "
                        "sample_weight 0 (any label)." if (row == -100).any() else "")
                raise ValueError(f"Sentence {n}: {error}{hint}") from None

    def _dataset_label_classes(self, spec):
        """A dataset's [batch, seq] labels (integers, or floats holding them) are tag ids."""
        rank = getattr(getattr(spec, "shape", None), "rank", None)
        return self.num_classes if rank == 2 and is_number(spec.dtype) else None

    def _weigh_classes(self, x, y, sample_weight, class_weight):
        """Each token takes its tag's class weight (`class_weight_table`)."""
        from kbert.tensorflow_inputs import class_weighted_dataset, tag_weights

        table = class_weight_table(class_weight, self.num_classes)
        if hasattr(x, "element_spec"):  # raw text packed by `fit`, or the user's dataset
            return class_weighted_dataset(x, table), sample_weight, None
        if is_stream(x) or y is None:
            raise ValueError("class_weight on a BertTokenClassifier weighs the labels of "
                             "arrays, raw text or a TensorFlow Dataset; a generator yields its "
                             "own token weights.")
        return x, tag_weights(y, table, sample_weight).numpy(), None

    def compile(self, optimizer="auto", loss=None, weighted_metrics=None, **kwargs):
        """Keras' `compile`, with token cross-entropy and weighted accuracy unless others are
        given.

        Args:
            optimizer: a Keras optimizer, or "auto" (`BertTask.compile`).
            loss: default: cross-entropy from the logits, averaged over the weighted tokens.
            weighted_metrics: default: `accuracy` over all weighted tokens seen
                (`TokenAccuracy`).
            **kwargs: `BertTask.compile`'s arguments.
        """
        if loss is None:
            loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight")
        if weighted_metrics is None:
            weighted_metrics = [TokenAccuracy()]
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics,
                        **kwargs)

    def task_config(self):
        return {
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "feature_layers": None if self.feature_layers is None else list(self.feature_layers),
            "lstm_units": self.lstm_units,
            "label_names": self.label_names,
        }


def class_weight_table(class_weight, classes):
    """float32 [classes]: `class_weight` ({class id: weight}; unnamed classes weigh 1), checked.
    Keras turns class weights into one weight an example and refuses them beside sample
    weights; a tagger weighs each token by its tag instead (`kbert.tensorflow_inputs`)."""
    if not isinstance(class_weight, dict):
        raise TypeError("class_weight is a dict {class id: weight}, got "
                        f"{type(class_weight).__name__}.")
    table = np.ones(classes, "float32")
    for key, weight in class_weight.items():
        if not (isinstance(key, (int, np.integer)) and 0 <= key < classes):
            raise ValueError(f"class_weight names class {key!r}; the head has classes 0 to "
                             f"{classes - 1}.")
        if not (isinstance(weight, (int, float, np.number)) and np.isfinite(weight)
                and weight >= 0):
            raise ValueError(f"class_weight of class {key} must be a finite number >= 0, got "
                             f"{weight!r}.")
        table[key] = weight
    return table
