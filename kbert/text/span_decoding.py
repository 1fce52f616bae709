"""`decode_spans`: start/end logits of SQuAD windows → one answer per question, as graph ops.

`decode_answers` of tests/spans/reference_squad.py (with `_best_span`) in the graph, so that an
exported SavedModel answers questions with no Python: per window, the `n_best` highest start and
end logits (stable: the lower position first on ties, as numpy's stable argsort) are paired; a
pair counts when both are context tokens, the start has its max context in the window, end ≥
start and the span is at most `max_answer_length` tokens. The best pair (first in start-major
order on ties) of the best window (the first on ties) gives the answer's characters. The null
score is the smallest start + end logit at [CLS] over the question's windows; the null-minus-
best difference is taken in float64 as numpy's Python floats do, so the v2.0 threshold decides
alike.

Logits may be shorter than the windows (a batch cut to its longest row): the positions cut off
are padding, never part of an answer. numpy's reference pads them back with -1e4 and ranks
them among the logits; here they are not ranked, the same answer unless a real logit is below
-1e4 (then numpy can push it out of its top n_best).
"""

from kbert.text.tf_libs import tf

VERSIONS = ("1.1", "2.0")
_NONE = 2**31 - 1  # int32's largest value


def window_best_spans(start_logits, end_logits, token_start, max_context, n_best,
                      max_answer_length):
    """(score, start, end) [W]: each window's best valid span (token positions) and its start +
    end logit; score -inf and positions 0 where the window has none."""
    k = tf.minimum(n_best, tf.shape(start_logits)[1])
    start_top, starts = tf.math.top_k(start_logits, k)  # sorted; ties: lower index first
    end_top, ends = tf.math.top_k(end_logits, k)
    valid = token_start >= 0
    start_ok = tf.gather(valid & (max_context > 0), starts, batch_dims=1)
    end_ok = tf.gather(valid, ends, batch_dims=1)
    s, e = starts[:, :, None], ends[:, None, :]
    ok = (start_ok[:, :, None] & end_ok[:, None, :] & (e >= s)
          & (e - s + 1 <= max_answer_length))
    scores = tf.where(ok, start_top[:, :, None] + end_top[:, None, :], -float("inf"))
    windows = tf.shape(scores)[0]
    scores = tf.reshape(scores, [windows, -1])
    ok = tf.reshape(ok, [windows, -1])
    best = tf.reduce_max(scores, axis=1, keepdims=True)
    pairs = tf.range(tf.shape(scores)[1])
    pick = tf.reduce_min(tf.where(ok & tf.equal(scores, best), pairs, _NONE), axis=1)
    found = pick < _NONE
    pick = tf.where(found, pick, 0)
    return (tf.where(found, best[:, 0], -float("inf")),
            tf.where(found, tf.gather(starts, pick // k, batch_dims=1), 0),
            tf.where(found, tf.gather(ends, pick % k, batch_dims=1), 0))


def _check(version, n_best, max_answer_length):
    if str(version) not in VERSIONS:
        raise ValueError(f"version must be '1.1' or '2.0', got {version!r}.")
    if int(n_best) < 1 or int(max_answer_length) < 1:
        raise ValueError(f"n_best and max_answer_length must be positive, got {n_best} and "
                         f"{max_answer_length}.")


def decode_spans(start_logits, end_logits, windows, contexts, version="1.1", n_best=20,
                 max_answer_length=30, null_threshold=0.0):
    """Answers for the questions behind `windows` (the output of `BertSpanPreprocessor`:
    `token_start`, `token_end`, `max_context`, `example_index` are read) from float
    [W, seq'] logits, seq' ≤ the windows' length; `contexts` string [batch].

    Returns, per question [batch]: `answer` (string: the context's characters; "" for none),
    `start_char`, `end_char` (int32, [start, end) code points, -1 for none), `score` (float32,
    the best non-null start + end logit, -inf when no span is valid), `null_score_diff`
    (float32, null score − score). Version "2.0" answers "" when the difference exceeds
    `null_threshold`.
    """
    _check(version, n_best, max_answer_length)
    contexts = tf.convert_to_tensor(contexts)
    if contexts.dtype != tf.string:
        raise TypeError(f"decode_spans expects contexts as strings, got {contexts.dtype.name}.")
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    length = tf.shape(start_logits)[1]
    cut = {k: tf.convert_to_tensor(windows[k])[:, :length]
           for k in ("token_start", "token_end", "max_context")}
    score, start, end = window_best_spans(start_logits, end_logits, cut["token_start"],
                                          cut["max_context"], n_best, max_answer_length)
    example = tf.cast(windows["example_index"], tf.int32)
    rows = tf.shape(contexts)[0]
    found = score > -float("inf")
    best = tf.math.unsorted_segment_max(tf.where(found, score, -float("inf")), example, rows)
    has = tf.math.unsorted_segment_max(tf.cast(found, tf.int32), example, rows) > 0
    index = tf.range(tf.shape(example)[0])
    chosen = tf.math.unsorted_segment_min(
        tf.where(found & tf.equal(score, tf.gather(best, example)), index, _NONE), example, rows)
    chosen = tf.where(has, chosen, 0)
    char_start = tf.gather(tf.gather(cut["token_start"], start, batch_dims=1), chosen)
    char_end = tf.gather(tf.gather(cut["token_end"], end, batch_dims=1), chosen)
    null = tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0], example, rows)
    best = tf.where(has, best, -float("inf"))
    diff = tf.cast(null, tf.float64) - tf.cast(best, tf.float64)
    answer = has
    if str(version) == "2.0":
        if not isinstance(null_threshold, (tf.Tensor, tf.Variable)):  # not via float32
            null_threshold = tf.constant(null_threshold, tf.float64)
        answer = has & (diff <= tf.cast(null_threshold, tf.float64))
    char_start = tf.where(answer, char_start, -1)
    char_end = tf.where(answer, char_end, -1)
    text = tf.strings.substr(contexts, tf.maximum(char_start, 0),
                             tf.maximum(char_end - char_start, 0), unit="UTF8_CHAR")
    return {"answer": tf.where(answer, text, ""), "start_char": char_start,
            "end_char": char_end, "score": best, "null_score_diff": tf.cast(diff, tf.float32)}
