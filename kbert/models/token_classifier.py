"""`BertTokenClassifier`: one label per token (CoNLL-2003 NER), fine-tuned or feature-based."""

import keras
import numpy as np

from kbert.config_checks import whole_number
from kbert.convert.task_heads import CheckpointHeads
from kbert.layers.dropout import Dropout
from kbert.models.backbone import BertBackbone
from kbert.models.class_weights import class_weight_table
from kbert.models.input_limits import check_class_labels
from kbert.models.raw_inputs import is_stream
from kbert.models.task import BertTask
from kbert.models.task_inputs import is_number
from kbert.models.feature_extractor import BertFeatureExtractor, PaddingToMask
from kbert.models.token_accuracy import TokenAccuracy
from kbert.text.token_preprocessor import BertTokenPreprocessor


@keras.saving.register_keras_serializable(package="kbert")
class BertTokenClassifier(BertTask):
    """Token tagging: per-token logits [batch, seq, num_classes].

    Fine-tuning (default, the paper's NER model): final hidden states → dropout → dense; all of
    BERT trains. Feature-based (`feature_layers`, e.g. (-4, -3, -2, -1), the paper's best
    feature-based setting): BERT is frozen, the chosen layers' hidden states are concatenated
    (`BertFeatureExtractor`) and a BiLSTM of `lstm_units` per direction, masked by
    `padding_mask`, feeds the dense layer; only the BiLSTM and the dense layer train.

    Labels go on the first sub-token of each word (`BertTokenPreprocessor` aligns them); fit
    with sample weights 1 there and 0 elsewhere, so the other sub-tokens, specials and padding
    count in neither the loss nor the metrics. `compile()` defaults: cross-entropy averaged
    over the weighted tokens, and `accuracy` over all weighted tokens seen (`TokenAccuracy`).
    `fit(class_weight={tag id: weight})` weighs each token by its tag, times its other weights.

    `label_names` (optional) names the classes in id order and is saved with the model, so a
    loaded model can decode its own predictions; it fixes `num_classes` when that is omitted.

    >>> model = BertTokenClassifier(BertBackbone(BertConfig.preset("tiny")), num_classes=9)
    """

    serving_task = "token_classifier"
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
        """Each token takes its tag's class weight (`kbert.models.class_weights`)."""
        from kbert.tensorflow_class_weights import class_weighted_dataset, tag_weights

        table = class_weight_table(class_weight, self.num_classes)
        if hasattr(x, "element_spec"):  # raw text packed by `fit`, or the user's dataset
            return class_weighted_dataset(x, table), sample_weight, None
        if is_stream(x) or y is None:
            raise ValueError("class_weight on a BertTokenClassifier weighs the labels of "
                             "arrays, raw text or a TensorFlow Dataset; a generator yields its "
                             "own token weights.")
        return x, tag_weights(y, table, sample_weight).numpy(), None

    def compile(self, optimizer="auto", loss=None, weighted_metrics=None, **kwargs):
        """Compiles with token cross-entropy (mean over weighted tokens) and weighted accuracy
        unless others are given."""
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
