"""`BertPretrainer`: the backbone with BERT's masked-LM and next-sentence heads."""

import keras

from kbert.layers import MaskedLMHead
from kbert.models.backbone import BertBackbone
from kbert.models.input_limits import check_class_labels
from kbert.models.task import BertTask
from kbert.models.task_inputs import is_raw_text
from kbert.text.masked_lm_preprocessor import BertMaskedLMPreprocessor

NSP_LABELS = "next-sentence labels (0 = IsNext, 1 = NotNext)"


@keras.saving.register_keras_serializable(package="kbert")
class BertPretrainer(BertTask):
    """BERT pre-training: masked language modelling and next sentence prediction heads.

    `compile()` defaults to the paper's losses (the MLM loss averaged over real predictions
    only), its pre-training rate (Adam at 1e-4), and the metrics `mlm_accuracy` (over real
    predictions) and `nsp_accuracy`. `fit`'s targets are `{"mlm": token ids [batch,
    predictions], "nsp": [batch]}` with sample weights `{"mlm": 1.0 at real predictions, 0.0
    at padding}`. `use_nsp=False` is the paper's "No NSP" ablation; a causal backbone
    (`BertBackbone(config, causal=True)`) with `use_nsp=False` and the next token as each
    position's target is the left-to-right LM ablation.

    Args:
        backbone: a `BertBackbone`; the MLM decoder shares its token embedding.
        use_nsp: bool. Whether to add the next-sentence head.
        preprocessor: optional; a `BertMaskedLMPreprocessor` (as keras-hub's
            `BertMaskedLM`), with which `fit` and `evaluate` take raw text, packed and masked
            afresh in the graph: `fit(strings)` trains the masked LM alone, which needs
            `use_nsp=False`; `fit((texts_a, texts_b), nsp_labels)` (0 IsNext, 1 NotNext)
            trains both heads. A mismatch (an NSP head without labels, labels without an NSP
            head) raises `ValueError` before training starts.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict plus `masked_positions` [batch, predictions] (int32, the
            positions to predict, padded with any valid position).

    Returns:
        A dict: `mlm`, logits [batch, predictions, vocab_size], and with `use_nsp`, `nsp`,
        logits [batch, 2] (class 0 = IsNext, 1 = NotNext, as in Google's data).

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> model = kbert.BertPretrainer(backbone)
        >>> ids = np.array([[101, 7592, 103, 102]])  # [CLS] hello [MASK] [SEP]
        >>> outputs = model({"token_ids": ids, "segment_ids": np.zeros_like(ids),
        ...                  "padding_mask": np.ones_like(ids), "masked_positions": np.array([[2]])})
        >>> tuple(outputs["mlm"].shape), tuple(outputs["nsp"].shape)
        ((1, 1, 30522), (1, 2))

    The masked LM alone on raw text:

    >>> model = kbert.BertPretrainer.from_pretrained("tiny", use_nsp=False, sequence_length=16)
    >>> type(model.preprocessor).__name__
    'BertMaskedLMPreprocessor'
    >>> model.compile()
    >>> history = model.fit(["The quick brown fox jumps over the lazy dog."] * 4, verbose=0)
    >>> sorted(history.history)
    ['loss', 'mlm_accuracy']
    """

    serving_kind = "fill_mask"
    preprocessor_cls = BertMaskedLMPreprocessor

    auto_learning_rate = 1e-4
    """`compile()`'s Adam rate: the paper's pre-training rate (appendix A.2)."""

    def __init__(self, backbone: BertBackbone, use_nsp=True, preprocessor=None, **kwargs):
        # === Layers ===
        config = backbone.config
        mlm_head = MaskedLMHead(
            backbone.token_embedding, activation=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps, initializer_range=config.initializer_range,
            dtype=backbone.dtype_policy, name="mlm_head")
        nsp_head = keras.layers.Dense(
            2, dtype=backbone.dtype_policy, name="nsp_head",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=config.initializer_range)) if use_nsp else None

        # === Functional graph ===
        inputs = {**backbone.input,
                  "masked_positions": keras.Input(shape=(None,), dtype="int32",
                                                  name="masked_positions")}
        encoded = backbone({k: inputs[k] for k in backbone.input},
                           output_positions=inputs["masked_positions"])
        outputs = {"mlm": mlm_head(encoded["output_at_positions"])}
        if use_nsp:
            outputs["nsp"] = nsp_head(encoded["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, preprocessor=preprocessor,
                         **kwargs)

        # === Config ===
        self.backbone = backbone
        self.use_nsp = use_nsp
        self.mlm_head = mlm_head
        self.nsp_head = nsp_head

    def compile(self, optimizer="auto", loss=None, weighted_metrics=None, **kwargs):
        """Keras' `compile`, with BERT's losses and metrics unless others are given.

        Args:
            optimizer: a Keras optimizer, or "auto" for Adam at 1e-4 (`BertTask.compile`).
            loss: default: `{"mlm": cross-entropy averaged over the weighted predictions,
                "nsp": cross-entropy}`.
            weighted_metrics: default: the accuracy of each head (logged as `mlm_accuracy`
                and `nsp_accuracy`).
            **kwargs: `BertTask.compile`'s arguments.
        """
        if loss is None:
            loss = {"mlm": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight")}
            if self.use_nsp:
                loss["nsp"] = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics is None:
            # Keras prefixes metric names with the output name only when there are several.
            name = "accuracy" if self.use_nsp else "mlm_accuracy"
            weighted_metrics = {"mlm": [keras.metrics.SparseCategoricalAccuracy(name)]}
            if self.use_nsp:
                weighted_metrics["nsp"] = [keras.metrics.SparseCategoricalAccuracy("accuracy")]
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics,
                        **kwargs)

    def task_config(self):
        return {"use_nsp": self.use_nsp}

    def label_ranges(self, sequence_length):
        """`{"mlm": vocabulary ids, "nsp": 2 classes}`, what `fit` checks dict labels against."""
        ranges = {"mlm": (self.backbone.config.vocab_size, "vocabulary ids")}
        if self.use_nsp:
            ranges["nsp"] = (2, NSP_LABELS)
        return ranges

    # --- raw text: NSP labels must match the heads -------------------------------------------

    def _check_nsp_labels(self, x, y):
        """Raw text `x` with NSP labels `y` (or a dataset whose elements carry them) must
        match `use_nsp`, and array labels be 0 or 1; packed inputs are checked by
        `label_ranges`."""
        if not is_raw_text(self, x):
            return
        spec = getattr(x, "element_spec", None)
        labelled = y is not None or isinstance(spec, tuple)
        if self.use_nsp and not labelled:
            raise ValueError(
                "This BertPretrainer has an NSP head (use_nsp=True), but the raw text came "
                "without next-sentence labels. Give pairs and labels, fit((texts_a, texts_b), "
                "labels) with 0 = IsNext, 1 = NotNext, or build it with use_nsp=False to train "
                "the masked LM on plain strings.")
        if not self.use_nsp and y is not None:
            raise ValueError("This BertPretrainer has no NSP head (use_nsp=False): leave out "
                             "y, the next-sentence labels.")
        check_class_labels(y, 2, "nsp labels", NSP_LABELS)

    def fit(self, x=None, y=None, *args, **kwargs):
        """`BertTask.fit`, once raw text's NSP labels are checked against `use_nsp`."""
        self._check_nsp_labels(x, y)
        validation = kwargs.get("validation_data")
        if validation is not None:
            validation = validation if isinstance(validation, tuple) else (validation,)
            self._check_nsp_labels(validation[0], validation[1] if len(validation) > 1 else None)
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        """`BertTask.evaluate`, once raw text's NSP labels are checked against `use_nsp`."""
        self._check_nsp_labels(x, y)
        return super().evaluate(x, y, *args, **kwargs)
