"""`BertSpanLabeler`: extractive question answering (SQuAD v1.1 / v2.0) on a `BertBackbone`."""

import keras

from kbert.convert.task_heads import CheckpointHeads
from kbert.models.backbone import BertBackbone
from kbert.models.task import BertTask
from kbert.text.span_preprocessor import BertSpanPreprocessor

MASKED_LOGIT = -1e4  # fits float16; exp(-1e4) is 0 in every float type


@keras.saving.register_keras_serializable(package="kbert")
class MaskedSpanLogits(keras.layers.Layer):
    """Splits [batch, seq, 2] span logits into start and end logits, padding masked out.

    Call arguments:
        logits: float [batch, seq, 2], a start and an end logit per token.
        padding_mask: int [batch, seq], 1 on real tokens.

    Returns:
        `(start_logits, end_logits)`, each [batch, seq], padding positions at `MASKED_LOGIT`.

    Examples:
        >>> import numpy as np
        >>> from kbert.models.span_labeler import MaskedSpanLogits
        >>> start, end = MaskedSpanLogits()(np.ones((1, 3, 2), "float32"), np.array([[1, 1, 0]]))
        >>> start.numpy().tolist()
        [[1.0, 1.0, -10000.0]]
    """

    def call(self, logits, padding_mask):
        mask = keras.ops.cast(padding_mask, "bool")
        fill = keras.ops.cast(MASKED_LOGIT, logits.dtype)
        start = keras.ops.where(mask, logits[..., 0], fill)
        end = keras.ops.where(mask, logits[..., 1], fill)
        return start, end

    def compute_output_spec(self, logits, padding_mask):
        # Two distinct tensors: one object returned twice would make both outputs one node
        # output in the functional graph, and "start_logits" would not be the start logits.
        return tuple(keras.KerasTensor(logits.shape[:-1], dtype=logits.dtype) for _ in "se")


@keras.saving.register_keras_serializable(package="kbert")
class BertSpanLabeler(BertTask):
    """Extractive question answering (SQuAD v1.1 / v2.0): the paper's SQuAD model.

    One dense layer (2 units) on every final hidden state gives a start and an end logit per
    token; the answer is the span maximising start + end. SQuAD v2.0's "no answer" is the span
    ([CLS], [CLS]) at position 0. `fit`'s targets are `{"start_logits": start index [batch],
    "end_logits": end index [batch]}`, or the tuple `(starts, ends)` in that order (Keras
    alone would pair a tuple with the outputs sorted by name, end first). `compile()`
    defaults: the mean of the start and end cross-entropies (the paper's loss) and their
    accuracies (logged as `start_logits_accuracy` / `end_logits_accuracy`).

    Args:
        backbone: a `BertBackbone`.
        preprocessor: optional; a `BertSpanPreprocessor`, with which
            `fit((questions, contexts), (answer_starts, answer_ends))` (or the answers by
            output name) trains on raw text: character spans, -1 for none; `sample_weight`,
            one a question, weighs each of its windows. `predict` on raw text returns one row
            of logits per window, not per question: answers come from
            `kbert.tasks.get_spec("squad").predict`, `kbert predict` or the export, which
            decode the windows back to each question.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict for `[CLS] question [SEP] context [SEP]`
            (`BertSpanPreprocessor` builds it, long contexts as overlapping windows).

    Returns:
        A dict: `start_logits` and `end_logits`, float [batch, seq], padding positions at
        -1e4. `kbert.text.span_decoding.decode_spans` turns them into answer text.

    Examples:
        >>> import kbert
        >>> from kbert.config import INPUT_KEYS
        >>> from kbert.text.span_decoding import decode_spans
        >>> model = kbert.BertSpanLabeler(kbert.BertBackbone(kbert.BertConfig.preset("tiny")))
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertSpanPreprocessor(tokenizer, sequence_length=32)
        >>> questions, contexts = ["Who wrote the notes?"], ["The notes were written by Ada."]
        >>> windows = preprocessor((questions, contexts))
        >>> logits = model({key: windows[key] for key in INPUT_KEYS})
        >>> tuple(logits["start_logits"].shape), float(logits["start_logits"][0, -1])
        ((1, 32), -10000.0)
        >>> answers = decode_spans(logits["start_logits"], logits["end_logits"], windows, contexts)
        >>> sorted(answers)
        ['answer', 'end_char', 'null_score_diff', 'score', 'start_char']
    """

    serving_kind = "span_labeler"
    preprocessor_cls = BertSpanPreprocessor
    default_sequence_length = 384
    checkpoint_heads = CheckpointHeads("span_logits", "BertForQuestionAnswering",
                                       google="run_squad.py")

    def __init__(self, backbone: BertBackbone, **kwargs):
        # === Layers ===
        head = keras.layers.Dense(
            2, dtype=backbone.dtype_policy, name="span_logits",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=backbone.config.initializer_range))
        split = MaskedSpanLogits(dtype=backbone.dtype_policy, name="masked_span_logits")

        # === Functional graph ===
        inputs = dict(backbone.input)
        sequence = backbone(inputs)["sequence_output"]
        start, end = split(head(sequence), inputs["padding_mask"])
        outputs = {"start_logits": start, "end_logits": end}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.backbone = backbone
        self.span_head = head
        self.span_split = split

    def compile(self, optimizer="auto", loss=None, loss_weights=None, metrics=None, **kwargs):
        """Keras' `compile`, with the paper's loss and start/end accuracy unless others are
        given.

        Args:
            optimizer: a Keras optimizer, or "auto" (`BertTask.compile`).
            loss: default: cross-entropy from the logits for each output.
            loss_weights: default: 0.5 each, when the loss is the default.
            metrics: default: the accuracy of each output.
            **kwargs: `BertTask.compile`'s arguments.
        """
        if loss is None:
            loss = {k: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                    for k in ("start_logits", "end_logits")}
            if loss_weights is None:
                loss_weights = {"start_logits": 0.5, "end_logits": 0.5}
        if metrics is None:
            metrics = {"start_logits": [keras.metrics.SparseCategoricalAccuracy("accuracy")],
                       "end_logits": [keras.metrics.SparseCategoricalAccuracy("accuracy")]}
        super().compile(optimizer=optimizer, loss=loss, loss_weights=loss_weights,
                        metrics=metrics, **kwargs)

    def label_ranges(self, sequence_length):
        """Both outputs' labels are positions in the packed row."""
        return {"start_logits": (sequence_length, "start positions in the row"),
                "end_logits": (sequence_length, "end positions in the row")}
