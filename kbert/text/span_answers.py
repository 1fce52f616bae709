"""A SQuAD example's answer as `BertSpanPreprocessor` reads it: character spans in either form
`fit` takes, checked against their contexts, turned into the sub-tokens they cover; and one
weight a question."""

from kbert.text.preprocessor_base import example_weights
from kbert.text.tf_libs import tf

ANSWER_FORM = ("y = (answer_starts, answer_ends), or by the span model's outputs "
               "{'start_logits': answer_starts, 'end_logits': answer_ends}")


def answer_columns(y):
    """(answer_starts, answer_ends) from `y` in either form of `ANSWER_FORM`."""
    if isinstance(y, dict):
        if set(y) != {"start_logits", "end_logits"}:
            raise ValueError(f"BertSpanPreprocessor takes {ANSWER_FORM}; got a dict with the "
                             f"keys {sorted(y)}.")
        return y["start_logits"], y["end_logits"]
    if not (isinstance(y, (tuple, list)) and len(y) == 2):
        raise TypeError(f"BertSpanPreprocessor takes {ANSWER_FORM}: two integer batches; got "
                        f"{type(y).__name__}.")
    return tuple(y)


def answer_chars(x, what, rows):
    """`x` (answer starts or ends: integers, one a question) as int64 [rows], checked."""
    x = tf.convert_to_tensor(x)
    if not (x.dtype.is_integer and x.dtype != tf.uint8):
        raise TypeError(f"BertSpanPreprocessor expects {what} as integers (characters, -1 for "
                        f"no answer), got dtype {x.dtype.name}.")
    x = tf.reshape(tf.cast(x, tf.int64), [-1])
    check = tf.debugging.assert_equal(tf.size(x, out_type=tf.int64), rows,
                                      message=f"{what} needs one entry per question")
    with tf.control_dependencies([check]):
        return tf.identity(x)


def check_spans(answer_starts, answer_ends, questions, contexts):
    """(answer_starts, answer_ends), asserted to lie in their contexts: 0 <= start < end <= the
    context's characters, or start < 0 (no answer). A span past its context covers no token:
    its windows would be left out as unmappable, and a `fit` on such spans trained on nothing."""
    length = tf.cast(tf.strings.length(contexts, unit="UTF8_CHAR"), tf.int64)
    bad = (answer_starts >= 0) & ((answer_ends <= answer_starts) | (answer_ends > length))
    pad = lambda t: tf.concat([t, tf.zeros([1], t.dtype)], 0)  # an empty batch has a row 0
    first = tf.argmax(pad(tf.cast(bad, tf.int32)), output_type=tf.int64)  # 0 when none is bad
    at = lambda t: tf.gather(pad(t), first)
    check = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(bad)),
        ["answer spans must lie in their context: 0 <= answer_start < answer_end <= its "
         "length in characters (answer_start -1: no answer); the question", at(questions),
         "has [answer_start, answer_end) =", at(answer_starts), at(answer_ends),
         "in a context of", at(length), "characters"], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(answer_starts), tf.identity(answer_ends)


def answer_tokens(starts, ends, answer_starts, answer_ends):
    """(first, last) int64 [batch]: the first and last sub-token overlapping each answer's
    [start, end) characters, -1 when there is no answer (start < 0) or it covers no token."""
    row = starts.value_rowids()
    index = tf.ragged.range(starts.row_lengths()).flat_values
    as64 = lambda t: tf.cast(t.flat_values, tf.int64)
    covered = ((as64(ends) > tf.gather(answer_starts, row))
               & (as64(starts) < tf.gather(answer_ends, row))
               & tf.gather(answer_starts >= 0, row))
    rows = starts.nrows()
    first = tf.math.unsorted_segment_min(tf.where(covered, index, tf.int64.max), row, rows)
    last = tf.math.unsorted_segment_max(tf.where(covered, index, -1), row, rows)
    found = last >= 0
    return tf.where(found, first, -1), tf.where(found, last, -1)


def question_weights(sample_weight, contexts):
    """`example_weights` of one weight a question; `fit`'s weights paired by output refused."""
    if isinstance(sample_weight, dict):  # `fit`'s (start, end) weights, paired by output
        raise ValueError("A span model's windows take one sample_weight a question, for the "
                         f"start and the end alike; got one for each of {sorted(sample_weight)}.")
    return example_weights(sample_weight, tf.size(contexts), "question")
