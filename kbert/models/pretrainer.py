"""`BertPretrainer`: the backbone with BERT's masked-LM and next-sentence heads."""

import keras

from kbert.layers import MaskedLMHead
from kbert.models.backbone import BertBackbone
from kbert.models.task import BertTask


@keras.saving.register_keras_serializable(package="kbert")
class BertPretrainer(BertTask):
    """Masked language modelling (+ next sentence prediction) on a `BertBackbone`.

    Inputs: the backbone's dict plus `masked_positions` [batch, predictions] (int32, padded with
    any valid position). Outputs: `mlm` logits [batch, predictions, vocab] and, with `use_nsp`,
    `nsp` logits [batch, 2] (class 0 = IsNext, 1 = NotNext, as in Google's data).

    Targets for `fit` are `{"mlm": token ids [batch, predictions], "nsp": [batch]}` with sample
    weights `{"mlm": 1.0 at real predictions, 0.0 at padding}`. `compile()` defaults to the
    paper's losses, MLM loss averaged over real predictions only, and the metrics
    `mlm_accuracy` (over real predictions) and `nsp_accuracy`.

    `use_nsp=False` is the paper's "No NSP" ablation; a causal backbone
    (`BertBackbone(config, causal=True)`) with `use_nsp=False` and the next token as each
    position's target is the left-to-right LM ablation.
    """

    def __init__(self, backbone: BertBackbone, use_nsp=True, **kwargs):
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
        encoded = backbone({k: inputs[k] for k in backbone.input})
        outputs = {"mlm": mlm_head(encoded["sequence_output"], inputs["masked_positions"])}
        if use_nsp:
            outputs["nsp"] = nsp_head(encoded["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.backbone = backbone
        self.use_nsp = use_nsp
        self.mlm_head = mlm_head
        self.nsp_head = nsp_head

    def compile(self, optimizer="adam", loss=None, weighted_metrics=None, **kwargs):
        """Compiles with BERT's losses and metrics unless others are given."""
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
