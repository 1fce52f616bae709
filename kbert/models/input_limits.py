"""What a backbone can embed, and the checks that its inputs hold nothing beyond it (and that
sparse labels are ids its heads score).

Beyond its limits the embedding lookup fails without XLA and, under XLA (kbert's default for
inputs of one length), reads a clamped row: an answer, but garbage. Task models check their
preprocessor when built and packed arrays given to `fit` / `evaluate` / `predict`; exports
check their preprocessor, and `kbert.tensorflow_inputs` each request (and each batch of a
dataset given to a task model).
"""

import dataclasses

import numpy as np

from kbert.config import INPUT_KEYS, BertConfig


@dataclasses.dataclass(frozen=True)
class InputLimits:
    """What a model's inputs may hold: ids in [0, vocab_size), segments in
    [0, type_vocab_size), at most `max_positions` tokens a row (None: not known)."""

    vocab_size: int = None
    type_vocab_size: int = None
    max_positions: int = None


def model_limits(model):
    """`InputLimits` from the `BertConfig` of `model` (a backbone) or of the backbone it holds;
    all None for another Keras model (exported with `task=`), whose limits are not known."""

    seen = set()
    while model is not None and id(model) not in seen:
        seen.add(id(model))
        config = getattr(model, "config", None)
        if isinstance(config, BertConfig):
            return InputLimits(config.vocab_size, config.type_vocab_size,
                               config.max_position_embeddings)
        model = getattr(model, "backbone", None)
    return InputLimits()


def check_preprocessor(limits, preprocessor):
    """Raises ValueError when the preprocessor can make ids the model cannot take: a longer
    `sequence_length` than its positions, or a larger vocabulary than its embedding."""
    length = getattr(preprocessor, "sequence_length", None)
    if limits.max_positions is not None and length is not None \
            and length > limits.max_positions:
        raise ValueError(f"The preprocessor's sequence_length={length} exceeds the model's "
                         f"{limits.max_positions} positions (max_position_embeddings).")
    size = preprocessor.tokenizer.vocabulary_size()
    if limits.vocab_size is not None and size > limits.vocab_size:
        raise ValueError(f"The preprocessor's vocabulary has {size} tokens but the model's "
                         f"embedding only {limits.vocab_size} (vocab_size).")


def check_packed_inputs(limits, features):
    """Raises ValueError naming the input when a dict of packed arrays (`token_ids`,
    `segment_ids`, `padding_mask`, and a pre-trainer's `masked_positions`) holds what the
    backbone cannot embed: ids outside the vocabulary or segments outside its types, a mask not
    0/1, rows longer than its positions, positions outside the row, non-integers, or inputs of
    different shapes. Tensors inside a traced function cannot be read here and pass."""
    try:
        arrays = {k: np.asarray(v) for k, v in features.items()
                  if k in (*INPUT_KEYS, "masked_positions")}
    except NotImplementedError:  # a symbolic tensor
        return
    ids = arrays.get("token_ids")
    if ids is None:
        return
    for key, array in arrays.items():
        if not (np.issubdtype(array.dtype, np.integer) or array.dtype == bool):
            raise ValueError(f"{key} must hold integers, got {array.dtype}.")
        if key in INPUT_KEYS and array.shape != ids.shape:
            raise ValueError(f"{key} has shape {array.shape}, token_ids {ids.shape}: the "
                             "inputs must have one shape.")
    if ids.ndim == 0 or ids.size == 0:  # no row to check: left to Keras' own shape checks
        return
    if limits.max_positions is not None and ids.shape[-1] > limits.max_positions:
        raise ValueError(f"token_ids rows hold {ids.shape[-1]} tokens, more than the model's "
                         f"{limits.max_positions} positions (max_position_embeddings).")
    ranges = {"token_ids": (limits.vocab_size, "vocabulary ids"),
              "segment_ids": (limits.type_vocab_size, "the model's segment types"),
              "padding_mask": (2, "0 or 1"),
              "masked_positions": (ids.shape[-1], "positions in the row")}
    for key, array in arrays.items():
        high, meaning = ranges[key]
        bad = (array < 0) | (array >= high) if high is not None else array < 0
        if array.size and bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{key} must be {meaning}, in [0, {'...' if high is None else high})"
                             f"; got {array[where]} at {where}.")


def check_class_labels(y, classes, name="Labels", meaning="class ids", any_shape=False):
    """Raises ValueError unless sparse array-like labels `y` ([batch] or [batch, 1]; any shape
    with `any_shape`) are `meaning`, integers in [0, `classes`): without XLA TensorFlow's
    cross-entropy fails deep in the graph, and under XLA its loss is NaN, which the optimizer
    then writes into every weight. Dense targets ([batch, classes]: one-hot, soft), datasets and
    symbolic tensors pass."""
    if y is None or isinstance(y, dict) or hasattr(y, "element_spec"):
        return
    try:
        labels = np.asarray(y)
    except NotImplementedError:  # a symbolic tensor
        return
    if not any_shape and (labels.ndim > 2 or (labels.ndim == 2 and labels.shape[1] != 1)):
        return
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be {meaning}, got dtype {labels.dtype}.")
    bad = (labels < 0) | (labels >= classes) | (labels != np.round(labels))
    if labels.size and bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be {meaning}, integers in [0, {classes}); got "
                         f"{labels[where]} at {where}.")


def check_numeric_labels(y, name="Labels"):
    """Raises ValueError unless array-like targets `y` (a regression's scores, say) are finite
    numbers: a NaN target makes the loss NaN, and the step writes NaN into every weight; text
    fails deep in the loss. Dicts, datasets and symbolic tensors pass."""
    if y is None or isinstance(y, dict) or hasattr(y, "element_spec"):
        return
    try:
        labels = np.asarray(y)
    except (NotImplementedError, ValueError):  # a symbolic tensor; ragged rows
        return
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numbers, got dtype {labels.dtype}.")
    bad = ~np.isfinite(labels) if labels.dtype.kind == "f" else None
    if bad is not None and bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be finite numbers; got {labels[where]} at {where}.")


def check_output_labels(y, token_ids, label_ranges):
    """Raises ValueError unless each integer label array of the dict `y` (one per output) holds
    ids its output scores: `label_ranges(sequence_length)` gives {output: (classes, meaning)}
    for rows as long as `token_ids`' (a span model's labels are positions in the row). Float
    targets (soft, for a loss of the user's) pass, as in `kbert.tensorflow_inputs`."""
    if not isinstance(y, dict) or token_ids is None or np.ndim(token_ids) == 0:
        return
    ranges = label_ranges(np.shape(token_ids)[-1])
    for key, (classes, meaning) in ranges.items():
        labels = np.asarray(y[key]) if key in y else None
        if labels is not None and np.issubdtype(labels.dtype, np.integer):
            check_class_labels(labels, classes, f"{key} labels", meaning, any_shape=True)
