"""`trim_to_longest`: cut a packed batch's padding down to its longest real row.

Preprocessors pad to a fixed `sequence_length`; attention costs grow with the padded length, so
every pipeline (tf.data for training, the serving signatures) runs the model on the batch cut to
its longest row instead. One function so that all of them cut the same way.
"""

from kbert.text.tf_libs import tf


def trim_to_longest(features, pad_to_multiple_of=1, mask_key="padding_mask"):
    """`features` (a dict of [..., seq] tensors sharing the last axis with `mask_key`) cut to
    the longest row's real length, at least 1. `pad_to_multiple_of=m` rounds that length up to a
    multiple of m (never past seq), so that an XLA-compiled model sees a few shapes only."""
    mask = features[mask_key]
    seq = tf.shape(mask)[-1]
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), -1)), 1)
    if pad_to_multiple_of > 1:
        longest = tf.minimum(-(-longest // pad_to_multiple_of) * pad_to_multiple_of, seq)
    return {k: v[..., :longest] if v.shape.rank and v.shape.rank >= mask.shape.rank else v
            for k, v in features.items()}
