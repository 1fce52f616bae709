"""`BertMultipleChoice`: one score per choice, softmax over the choices (SWAG, MMLU)."""

import keras
import numpy as np

from kbert.config import INPUT_KEYS
from kbert.config_checks import RowError, whole_number
from kbert.convert.task_heads import CheckpointHeads
from kbert.layers.dropout import Dropout
from kbert.models.backbone import BertBackbone
from kbert.models.classifier import classification_defaults
from kbert.models.task import BertTask
from kbert.text.preprocessor import BertPreprocessor


@keras.saving.register_keras_serializable(package="kbert")
class FoldChoices(keras.layers.Layer):
    """Folds [batch, choices, seq] into [batch * choices, seq], so each choice is one BERT input.

    Examples:
        >>> import numpy as np
        >>> from kbert.models.multiple_choice import FoldChoices
        >>> tuple(FoldChoices()(np.zeros((2, 4, 16), "int32")).shape)
        (8, 16)
    """

    def call(self, x):
        return keras.ops.reshape(x, (-1, keras.ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        batch, choices, seq = input_shape
        return (None if batch is None or choices is None else batch * choices, seq)


@keras.saving.register_keras_serializable(package="kbert")
class UnfoldChoices(keras.layers.Layer):
    """Unfolds [batch * choices, 1] scores into [batch, choices] logits.

    Args:
        num_choices: int. The choices of each question.

    Examples:
        >>> import numpy as np
        >>> from kbert.models.multiple_choice import UnfoldChoices
        >>> UnfoldChoices(2)(np.array([[0.5], [1.5], [2.0], [-1.0]])).numpy().tolist()
        [[0.5, 1.5], [2.0, -1.0]]
    """

    def __init__(self, num_choices, **kwargs):
        super().__init__(**kwargs)
        self.num_choices = int(num_choices)

    def call(self, scores):
        return keras.ops.reshape(scores, (-1, self.num_choices))

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        return (None if batch is None else batch // self.num_choices, self.num_choices)

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices}


@keras.saving.register_keras_serializable(package="kbert")
class BertMultipleChoice(BertTask):
    """Multiple choice: one score per choice, softmax over the choices (the paper's SWAG model).

    Each choice is packed with its context as a pair (`[CLS] question [SEP] choice [SEP]`),
    scored by a dense layer on the pooled output, and the scores of one question's choices are
    its logits; the target is the index of the right choice. `compile()` defaults to
    cross-entropy from the logits (the softmax over choices) and `accuracy`.

    Args:
        backbone: a `BertBackbone`.
        num_choices: int, at least 2. The choices of every question.
        dropout: float. The dropout rate on the pooled output.
        preprocessor: optional; a `BertPreprocessor`, with which `fit`, `evaluate` and
            `predict` take raw `(questions, choices)`: choices as one list (or row) of
            `num_choices` strings per question.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Call arguments:
        inputs: the backbone's dict with every tensor int32 [batch, num_choices, seq]
            (`kbert.data.tasks` builds them).

    Returns:
        The logits [batch, num_choices].

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> model = kbert.BertMultipleChoice(backbone, num_choices=2)
        >>> ids = np.array([[[101, 7592, 102, 2088, 102], [101, 7592, 102, 2154, 102]]])
        >>> logits = model({"token_ids": ids, "segment_ids": np.array([[[0, 0, 0, 1, 1]] * 2]),
        ...                 "padding_mask": np.ones_like(ids)})
        >>> tuple(logits.shape)
        (1, 2)

        Raw text, with a preprocessor:

        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=16)
        >>> model = kbert.BertMultipleChoice(backbone, num_choices=2, preprocessor=preprocessor)
        >>> model.predict((["The sky is"], [["blue.", "loud."]]), verbose=0).shape
        (1, 2)
    """

    serving_kind = "multiple_choice"
    preprocessor_cls = BertPreprocessor
    checkpoint_heads = CheckpointHeads("choice_scorer", "BertForMultipleChoice")

    def __init__(self, backbone: BertBackbone, num_choices=4, dropout=0.1, **kwargs):
        num_choices = whole_number("num_choices", num_choices, 2)
        # === Layers ===
        fold = FoldChoices(name="fold_choices")
        dropout_layer = Dropout(dropout, dtype=backbone.dtype_policy,
                                             name="choice_dropout")
        scorer = keras.layers.Dense(
            1, dtype=backbone.dtype_policy, name="choice_scorer",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=backbone.config.initializer_range))
        unfold = UnfoldChoices(num_choices, name="unfold_choices")

        # === Functional graph ===
        inputs = {k: keras.Input(shape=(num_choices, None), dtype="int32", name=k)
                  for k in INPUT_KEYS}
        pooled = backbone({k: fold(inputs[k]) for k in INPUT_KEYS})["pooled_output"]
        outputs = unfold(scorer(dropout_layer(pooled)))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.backbone = backbone
        self.num_choices = num_choices
        self.dropout = dropout
        self.choice_scorer = scorer

    @property
    def label_classes(self):
        """How many classes the labels index: `num_choices`."""
        return self.num_choices

    def _text_dataset(self, x, *args, **kwargs):
        """Raw `(questions, choices)`, each question with `num_choices` choices: Keras' own
        error for another number names a shape, not the question."""
        return super()._text_dataset(self._checked_choices(x), *args, **kwargs)

    def _checked_choices(self, x):
        """`x`, once each question's choices are counted (lists, ragged tensors, which become
        dense) or their shape checked (arrays, tensors, a dataset's batches where its element
        spec knows it)."""
        if hasattr(x, "element_spec"):  # batches of `x` or `(x, y, ...)`, x = (q, choices)
            spec = x.element_spec
            inputs = spec[0] if isinstance(spec, tuple) and isinstance(spec[0], tuple) else spec
        else:
            inputs = x
        choices = inputs[1] if isinstance(inputs, tuple) and len(inputs) == 2 else None
        ragged = hasattr(choices, "row_lengths") and not hasattr(x, "element_spec")
        if isinstance(choices, (list, tuple)) or ragged:
            counts = (np.asarray(choices.row_lengths()) if ragged else
                      [1 if isinstance(row, (str, bytes)) else len(row) for row in choices])
            for n, count in enumerate(counts):
                if count != self.num_choices:
                    raise RowError(f"The question of {{where}} has {count} choice(s); this "
                                   f"model scores {self.num_choices} a question "
                                   "(num_choices).", n)
            return (x[0], choices.to_tensor()) if ragged else x
        shape = getattr(choices, "shape", None)
        if shape is not None and len(shape) >= 2 and shape[1] not in (None, self.num_choices):
            raise ValueError(f"The choices have shape {tuple(shape)}: {shape[1]} a question; "
                             f"this model scores {self.num_choices} a question (num_choices).")
        return x

    def compile(self, optimizer="auto", loss=None, metrics=None, **kwargs):
        """Keras' `compile`, with cross-entropy over the choices and `accuracy` unless others
        are given.

        Args:
            optimizer: a Keras optimizer, or "auto" (`BertTask.compile`).
            loss: default: cross-entropy from the logits.
            metrics: default: `accuracy`.
            **kwargs: `BertTask.compile`'s arguments.
        """
        loss, metrics = classification_defaults(loss, metrics)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def task_config(self):
        return {"num_choices": self.num_choices, "dropout": self.dropout}
