"""The TensorFlow side of a task model's input path (`kbert.models.task_inputs`): the input
checks of `kbert.models.input_limits` as graph ops, where the values are not known when the
model is called (each request to an export, each batch of a tf.data dataset given to `fit` /
`evaluate` / `predict`), and a tagger's class weights applied to a dataset's labels. Kept out
of `kbert/models`, whose code is `keras.ops` only; the models import it when they are handed a
tf.data dataset.

`serve_token_ids` takes ids from clients that tokenize themselves. Without checks, an embedding
lookup wraps negative ids (keras.ops.take follows numpy: token id -5 answered as id
vocab_size - 5, segment -1 as 1) and a padding mask of 5 counts as 1: answers to requests that
mean nothing; under XLA an id past the table reads a clamped row, and a label past the logits
makes the loss NaN. Here each becomes an InvalidArgument error that names the input and the
allowed range, before the model runs.
"""

import tensorflow as tf

from kbert.config import INPUT_KEYS
from kbert.compat import without_autotune


def _in_range(values, allowed, low, high):
    """Asserts low <= values < high (no upper bound when high is None); `allowed` says what
    the input may hold, in the error."""
    checks = [tf.debugging.assert_greater_equal(tf.reduce_min(values), tf.cast(low, values.dtype),
                                                message=f"{allowed}; got a smaller value")]
    if high is not None:
        checks.append(tf.debugging.assert_less(tf.reduce_max(values),
                                               tf.cast(high, values.dtype),
                                               message=f"{allowed}; got a larger value"))
    return checks


def check_token_inputs(features, limits):
    """`features` ({token_ids, segment_ids, padding_mask}, optionally a pre-trainer's
    `masked_positions`; integers, the first three of one shape [..., seq]) with control
    dependencies on every check; a failed one raises InvalidArgumentError."""
    ids = features["token_ids"]
    shape = tf.shape(ids)
    checks = []
    for key in INPUT_KEYS[1:]:
        checks.append(tf.debugging.assert_equal(
            tf.shape(features[key]), shape,
            message=f"{key} must have the shape of token_ids ([batch, seq])"))
    with tf.control_dependencies(checks):  # ranges only over inputs of one shape
        # A row needs its first token: the pooled output reads it (else a strided-slice error).
        checks = [tf.debugging.assert_positive(
            shape[-1], message="token_ids rows must hold at least one token ([CLS]); got "
                               "rows of length 0")]
        if limits.max_positions is not None:
            checks.append(tf.debugging.assert_less_equal(
                shape[-1], limits.max_positions,
                message=f"token_ids rows must hold at most {limits.max_positions} tokens (the "
                        f"model's positions); got longer rows"))
        vocab, types = limits.vocab_size, limits.type_vocab_size
        checks += _in_range(ids, "token_ids must be vocabulary ids, in "
                            f"[0, {'...' if vocab is None else vocab})", 0, vocab)
        checks += _in_range(features["segment_ids"], "segment_ids must be in "
                            f"[0, {'...' if types is None else types}) (the model's segment "
                            "types)", 0, types)
        checks += _in_range(features["padding_mask"], "padding_mask must be 0 or 1", 0, 2)
        if "masked_positions" in features:
            checks += _in_range(features["masked_positions"], "masked_positions must be "
                                "positions in the row, in [0, seq)", 0, shape[-1])
    with tf.control_dependencies(checks):
        return {k: tf.identity(v) for k, v in features.items()}


def check_label_ids(labels, classes, name="labels", meaning="class ids"):
    """`labels` (integers, or floats holding integers) with a control dependency on
    0 <= labels < `classes` (an int, or a scalar tensor: the row length, named "seq" in the
    error)."""
    bound = "seq" if isinstance(classes, tf.Tensor) else classes
    allowed = f"{name} must be {meaning}, in [0, {bound})"
    checks = _in_range(labels, allowed, 0, classes)
    if labels.dtype.is_floating:  # a float column: 2.5 or NaN is no id (NaN fails all tests)
        checks.append(tf.debugging.assert_equal(labels, tf.round(labels),
                                                message=f"{allowed}; got a non-integer"))
    with tf.control_dependencies(checks):
        return tf.identity(labels)


def check_finite(labels, name="labels"):
    """`labels` (floats) with a control dependency on every value being finite: a NaN target
    makes the loss NaN, and training goes on, every weight NaN after one step."""
    with tf.control_dependencies([tf.debugging.assert_all_finite(
            labels, f"{name} must be finite numbers; got NaN or infinity")]):
        return tf.identity(labels)


def _is_float_tensor(labels):
    return isinstance(labels, tf.Tensor) and labels.dtype.is_floating


def _check_label_types(spec):
    """Raises ValueError naming the labels of a dataset (`spec`: their TensorSpec, or a dict
    of them) that are not numbers, before Keras' cast fails inside the step."""
    for key, part in (spec.items() if isinstance(spec, dict) else [("labels", spec)]):
        dtype = getattr(part, "dtype", None)
        if dtype is not None and not (dtype.is_integer or dtype.is_floating or dtype.is_bool):
            raise ValueError(f"The dataset's {'' if key == 'labels' else key + ' '}labels must "
                             f"be numbers (class ids or targets), got {dtype.name}; map label "
                             "names to ids first (`dataset.map`).")


def checked_dataset(dataset, limits, label_classes=None, label_ranges=None,
                    labels_by_output=None):
    """`dataset` (elements `inputs`, `(inputs,)`, `(inputs, labels)` or `(inputs, labels,
    weights)`, inputs a dict of packed ids) with every batch checked as it is read
    (`check_token_inputs`). Labels must be numbers; integer ones are checked by
    `check_label_ids`: against `label_classes` when given, or, for a dict of labels, each
    against `label_ranges(row length)`'s {output: (classes, meaning)}; float ones must be
    finite (`check_finite`), and so must float sample weights. `labels_by_output` first turns
    a tuple of labels (and of weights) into that dict (`kbert.models.task_inputs.by_output`)."""
    def check_labels(labels, length):
        if label_classes is not None:
            return check_label_ids(labels, label_classes)
        if not isinstance(labels, dict):
            return check_finite(labels) if _is_float_tensor(labels) else labels
        ranges = label_ranges(length) if label_ranges is not None else {}
        checked = dict(labels)
        for key, values in labels.items():
            if _is_float_tensor(values):
                checked[key] = check_finite(values, f"{key} labels")
            elif key in ranges and values.dtype.is_integer:
                classes, meaning = ranges[key]
                checked[key] = check_label_ids(values, classes, f"{key} labels", meaning)
        return checked

    def check(inputs, *rest):
        inputs = {**inputs, **check_token_inputs(
            {k: v for k, v in inputs.items() if k in (*INPUT_KEYS, "masked_positions")},
            limits)}
        if rest:
            if labels_by_output:  # a tuple of weights is paired as labels are
                rest = (labels_by_output(rest[0]),
                        *(labels_by_output(w, "sample weight") for w in rest[1:]))
            rest = (check_labels(rest[0], tf.shape(inputs["token_ids"])[-1]),
                    *(tf.nest.map_structure(lambda w: check_finite(w, "sample_weight")
                                            if w.dtype.is_floating else w, weights)
                      for weights in rest[1:]))
        return (inputs, *rest)

    single = not isinstance(dataset.element_spec, tuple)
    if not single and len(dataset.element_spec) > 1:
        _check_label_types(dataset.element_spec[1])
    # A parallel map runs ahead of the model as a prefetch would. The autotuning thread goes
    # unless the user's options ask for it: its iterator's end stalled the next calls.
    return without_autotune(dataset.map((lambda x: check(x)[0]) if single else check,
                                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


# --- a tagger's class weights --------------------------------------------------------------------

def tag_weights(labels, table, weights=None):
    """Each label's weight in `table` (float32 [classes]) times `weights` (one a token, or one
    a sentence)."""
    weight = tf.gather(tf.constant(table), tf.cast(labels, tf.int32))
    if weights is not None:
        given = tf.cast(weights, weight.dtype)
        extra = tf.ones([tf.rank(weight) - tf.rank(given)], tf.int32)
        weight *= tf.reshape(given, tf.concat([tf.shape(given), extra], 0))
    return weight


def class_weighted_dataset(dataset, table):
    """`dataset` with each batch's weights replaced by `tag_weights` of its labels."""
    if not (isinstance(dataset.element_spec, tuple) and len(dataset.element_spec) >= 2):
        raise ValueError("class_weight weighs labels: the dataset yields no labels.")
    weigh = lambda inputs, labels, *weights: (  # noqa: E731
        inputs, labels, tag_weights(labels, table, *weights))
    return dataset.map(weigh, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
