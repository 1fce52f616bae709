"""Checks of what a serving request may hold, in the graph (limits: `kbert.models.input_limits`).

`serve_token_ids` takes ids from clients that tokenize themselves. Without checks, an embedding
lookup wraps negative ids (keras.ops.take follows numpy: token id -5 answered as id
vocab_size - 5, segment -1 as 1) and a padding mask of 5 counts as 1: answers to requests that
mean nothing. `check_token_inputs` makes each such request an InvalidArgument error that names
the input and the allowed range, before the model runs.
"""

import tensorflow as tf

from kbert.models.backbone import INPUT_KEYS


def _in_range(values, allowed, low, high):
    """Asserts low <= values < high (no upper bound when high is None); `allowed` says what
    the input may hold, in the error."""
    checks = [tf.debugging.assert_greater_equal(tf.reduce_min(values), low,
                                                message=f"{allowed}; got a smaller value")]
    if high is not None:
        checks.append(tf.debugging.assert_less(tf.reduce_max(values), high,
                                               message=f"{allowed}; got a larger value"))
    return checks


def check_token_inputs(features, limits):
    """`features` ({token_ids, segment_ids, padding_mask}, int32 of one shape [..., seq]) with
    control dependencies on every check; a failed one raises InvalidArgumentError."""
    ids = features["token_ids"]
    shape = tf.shape(ids)
    checks = []
    for key in INPUT_KEYS[1:]:
        checks.append(tf.debugging.assert_equal(
            tf.shape(features[key]), shape,
            message=f"{key} must have the shape of token_ids ([batch, seq])"))
    with tf.control_dependencies(checks):  # ranges only over inputs of one shape
        checks = []
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
    with tf.control_dependencies(checks):
        return {k: tf.identity(v) for k, v in features.items()}
