"""Sliding windows over sub-tokens, as graph ops: run_squad.py's doc spans and its "max
context" rule, shared by SQuAD windows (`BertSpanPreprocessor`) and long-text tagging
(`BertTokenPreprocessor.windows`).

No Python loop over examples: a text of n sub-tokens in windows of `room` sub-tokens has a
closed form. With step = min(room, stride), there are 1 + ceil(max(n - room, 0) / step)
windows, window k starting at k·step and holding min(n - k·step, room) tokens. A token's "max
context" window is found with segment ops over every (window, token) pair, scored in float64
exactly as numpy does so that ties break the same way (first window wins).
"""

from kbert.text.tf_libs import tf


def window_plan(lengths, room, stride):
    """(example, begin, length) int64 [W]: every window's input row, first token and token
    count, from the int64 [batch] sub-token counts and the room (scalar or [batch]) a window
    has for them."""
    room = tf.broadcast_to(tf.cast(room, tf.int64), tf.shape(lengths, out_type=tf.int64))
    step = tf.minimum(room, tf.cast(stride, tf.int64))
    count = 1 + (tf.maximum(lengths - room, 0) + step - 1) // step
    example = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
    begin = tf.ragged.range(count).flat_values * tf.gather(step, example)
    length = tf.minimum(tf.gather(lengths, example) - begin, tf.gather(room, example))
    return example, begin, length


def max_context_flags(example, begin, length, lengths):
    """(positions, flags): the tokens of each window (ragged int64 [W, None], indices into its
    row) and whether the window is the token's max-context one (bool, same shape). Score
    min(left, right) + 0.01·length, in float64 as numpy does; ties → the first window."""
    positions = tf.ragged.range(begin, begin + length)
    window = positions.value_rowids()
    p = positions.flat_values
    b, n = tf.gather(begin, window), tf.gather(length, window)
    score = tf.cast(tf.minimum(p - b, b + n - 1 - p), tf.float64) + 0.01 * tf.cast(n, tf.float64)
    # One segment per (input row, token): rows sharing a text differ in windows.
    token = tf.gather(tf.cumsum(lengths, exclusive=True), tf.gather(example, window)) + p
    tokens = tf.reduce_sum(lengths)
    best = tf.math.unsorted_segment_max(score, token, tokens)
    ties = tf.where(tf.equal(score, tf.gather(best, token)), window, tf.int64.max)
    first = tf.math.unsorted_segment_min(ties, token, tokens)
    return positions, positions.with_flat_values(tf.equal(tf.gather(first, token), window))
