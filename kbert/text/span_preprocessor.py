"""BertSpanPreprocessor: (question, context) strings → SQuAD windows, as graph ops.

`squad_features` of tests/spans/reference_squad.py (the numpy transcription of Google's
run_squad.py that kbert used before) in the graph: same windows, ids, character offsets, max-
context flags and targets (that module's docstring gives the algorithm), so training (tf.data),
a Keras model and an exported SavedModel share it.

No Python loop over examples: the windows of a context after a question of q sub-tokens (cut
to `max_query_length`) are `kbert.text.windows` with room = sequence_length - q - 3.

Each input row gives one or more windows, so the outputs have W ≥ batch rows and
`example_index` says which input row a window came from.

Bounded work per input: a question is cut to the bytes its `max_query_length` sub-tokens can
come from before tokenization (`PreprocessorBase.cap`). A context is not cut to one window, since
it is windowed, but to its first `max_context_length` sub-tokens (default 4,096: 4.8 times the
longest SQuAD v1.1 context, 853; 30 windows at 384/128), and its text to the bytes those can
come from before tokenization. Answers beyond are not found; a served request of 16 MB then
costs what one of ~3 MB does.
"""

import keras
import tensorflow as tf

from kbert.text.datasets import batched_dataset, check_example_counts, prefetched
from kbert.text.preprocessor_base import (PreprocessorBase, example_weights, string_batch,
                                         traced)
from kbert.text.trim import trim_to_longest
from kbert.text.windows import max_context_flags, window_plan

WINDOW_KEYS = ("token_ids", "segment_ids", "padding_mask", "token_start", "token_end",
               "max_context")


def check_lengths(sequence_length, max_query_length, doc_stride):
    """Raises ValueError unless a window holds [CLS] question [SEP] ≥1 context token [SEP]."""
    if max_query_length < 1 or doc_stride < 1:
        raise ValueError(f"max_query_length and doc_stride must be positive, got "
                         f"{max_query_length} and {doc_stride}.")
    if sequence_length - max_query_length - 3 < 1:
        raise ValueError(f"sequence_length={sequence_length} leaves no room for the context "
                         f"after a question of max_query_length={max_query_length} sub-tokens "
                         "and [CLS]/[SEP]/[SEP]; raise sequence_length or lower "
                         "max_query_length.")


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


def _answer_chars(x, what, rows):
    x = tf.convert_to_tensor(x)
    if not (x.dtype.is_integer and x.dtype != tf.uint8):
        raise TypeError(f"BertSpanPreprocessor expects {what} as integers (characters, -1 for "
                        f"no answer), got dtype {x.dtype.name}.")
    x = tf.reshape(tf.cast(x, tf.int64), [-1])
    check = tf.debugging.assert_equal(tf.size(x, out_type=tf.int64), rows,
                                      message=f"{what} needs one entry per question")
    with tf.control_dependencies([check]):
        return tf.identity(x)


def _check_spans(answer_starts, answer_ends, questions, contexts):
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


def _has_text(lengths, what):
    """An assertion that every row has word pieces (`lengths` > 0), naming the first without."""
    empty = tf.where(lengths <= 0)[:, 0]
    return tf.debugging.Assert(tf.size(empty) == 0, [f"{what} of row", empty[:1],
                                                     "is blank (no word piece)"])


def _question_weights(sample_weight, contexts):
    """`example_weights` of one weight a question; `fit`'s weights paired by output refused."""
    if isinstance(sample_weight, dict):  # `fit`'s (start, end) weights, paired by output
        raise ValueError("A span model's windows take one sample_weight a question, for the "
                         f"start and the end alike; got one for each of {sorted(sample_weight)}.")
    return example_weights(sample_weight, tf.size(contexts), "question")


@keras.saving.register_keras_serializable(package="kbert")
class BertSpanPreprocessor(PreprocessorBase):
    """`windows`: questions and contexts (string [batch]), optionally answer character spans
    (int [batch], [start, end) in code points inside the context, -1 = no answer; others fail
    `_check_spans`) → a dict of windows, W rows:
    int32 [W, sequence_length] `token_ids`, `segment_ids`, `padding_mask`, `token_start`,
    `token_end` (each context token's characters in its context, -1 elsewhere),
    `max_context` (1 where this window is the token's best), int32 [W] `example_index`; with
    answers also int32 [W] `start_positions`, `end_positions` (0 = [CLS]),
    `answer_in_window` and `unmappable` (1 for every window of a row whose answer covers no
    sub-token: train without those, as the numpy reference's `training_features` does).
    Called as keras-hub's preprocessors are, `preprocessor((questions, contexts))` gives
    those windows and `preprocessor((questions, contexts), (answer_starts, answer_ends))`
    what `fit` trains on (`call`).

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length, doc_stride, max_query_length: as in `squad_features`; without a
        `max_query_length`, run_squad.py's 64, or half a window too short for that.
      max_context_length: the sub-tokens of a context that are windowed (the rest is cut).
    """

    def __init__(self, tokenizer, sequence_length=384, doc_stride=128, max_query_length=None,
                 max_context_length=4096, **kwargs):
        super().__init__(tokenizer, **kwargs)
        if max_query_length is None:
            max_query_length = max(1, min(64, (int(sequence_length) - 3) // 2))
        check_lengths(int(sequence_length), int(max_query_length), int(doc_stride))
        if int(max_context_length) < 1:
            raise ValueError(f"max_context_length must be positive, got {max_context_length}.")
        self.max_context_length = int(max_context_length)
        # Keras would cast float answer positions to the layer's int32 dtype silently.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.sequence_length = int(sequence_length)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)

    def build(self, *shapes, **kwargs):
        self.built = True  # no weights; the tokenizer's tables exist from its constructor

    def call(self, x, y=None, sample_weight=None):
        """`x = (questions, contexts)` → `windows(*x)`, every column answers are decoded by.
        With `y = (answer_starts, answer_ends)`, keras-hub's form, so that
        `dataset.map(preprocessor)` packs elements `((questions, contexts), (answer_starts,
        answer_ends)[, sample_weight])` for `fit`: `(inputs, {"start_logits": start positions,
        "end_logits": end positions}[, weights])`, the windows whose answer covers a sub-token
        (as run_squad.py trains), each weighted by its question's `sample_weight`."""
        if not (isinstance(x, (tuple, list)) and len(x) == 2
                and not any(isinstance(part, (str, bytes)) for part in x)):
            raise TypeError("BertSpanPreprocessor takes x = (questions, contexts), a tuple of "
                            f"two string batches; got {type(x).__name__} {x!r:.80}.")
        if y is None:
            if sample_weight is not None:
                raise ValueError("sample_weight weighs answers: give y = (answer_starts, "
                                 "answer_ends) too.")
            return self.windows(*x)
        if not (isinstance(y, (tuple, list)) and len(y) == 2):
            raise TypeError("BertSpanPreprocessor takes y = (answer_starts, answer_ends), a "
                            f"tuple of two integer batches; got {type(y).__name__}.")
        out = self.windows(*x, *y)
        keep = tf.equal(out["unmappable"], 0)
        parts = ({k: out[k] for k in WINDOW_KEYS[:3]},
                 {"start_logits": out["start_positions"], "end_logits": out["end_positions"]})
        if sample_weight is not None:
            parts += (tf.gather(_question_weights(sample_weight, x[1]), out["example_index"]),)
        return tf.nest.map_structure(lambda t: tf.boolean_mask(t, keep), parts)

    def windows(self, questions, contexts, answer_starts=None, answer_ends=None,
                require_questions=False):
        """The class docstring's dict of windows of `(questions, contexts)`, with targets
        when the answers' character spans are given. `require_questions`: a question without
        a word piece (empty, blank, or only characters the tokenizer drops) asks nothing, an
        InvalidArgument error naming its row rather than a span of the context (for requests;
        datasets are read as they are). A context without one has no answer ("", score -inf)."""
        if (answer_starts is None) != (answer_ends is None):
            raise ValueError("Give both answer_starts and answer_ends, or neither.")
        questions = string_batch(questions, "BertSpanPreprocessor", "questions")
        contexts = string_batch(contexts, "BertSpanPreprocessor", "contexts")
        rows = tf.size(contexts, out_type=tf.int64)
        check = tf.debugging.assert_equal(tf.size(questions, out_type=tf.int64), rows,
                                          message="questions and contexts differ in number")
        with tf.control_dependencies([check]):
            questions = tf.identity(questions)
        question_ids = self.tokenizer(self.cap(questions, self.max_query_length))
        question_ids = question_ids[:, :self.max_query_length]
        # Rows often share a context (SQuAD: ~5 questions each): tokenize each one once.
        unique, which = tf.unique(contexts, out_idx=tf.int64)
        cut = self.cap(unique, self.max_context_length)
        ids, starts, ends = (t[:, :self.max_context_length]
                             for t in self.tokenizer.tokenize_with_offsets(cut, "char"))
        ids, starts, ends = (tf.gather(t, which) for t in (ids, starts, ends))
        n, q = ids.row_lengths(), question_ids.row_lengths()
        if require_questions:
            with tf.control_dependencies([_has_text(q, "question")]):
                q = tf.identity(q)
        example, begin, length = window_plan(n, self.sequence_length - q - 3,
                                             self.doc_stride)
        positions, is_max = max_context_flags(example, begin, length, n)
        at = (tf.gather(ids.row_splits, tf.gather(example, positions.value_rowids()))
              + positions.flat_values)  # the flat index of each window token in `ids`
        window = lambda t, dtype=tf.int32: positions.with_flat_values(
            tf.cast(tf.gather(t.flat_values, at), dtype))
        out = self._pack(tf.gather(question_ids, example), window(ids), window(starts),
                         window(ends), tf.cast(is_max, tf.int32))
        out["example_index"] = tf.cast(example, tf.int32)
        if answer_starts is not None:
            answer = _check_spans(_answer_chars(answer_starts, "answer_starts", rows),
                                  _answer_chars(answer_ends, "answer_ends", rows),
                                  questions, contexts)
            first, last = answer_tokens(starts, ends, *answer)
            out.update(self._targets(example, begin, length, tf.gather(q, example) + 2,
                                     first, last, answer[0] >= 0))
        return out

    def _pack(self, question, context, starts, ends, is_max):
        """[CLS] question [SEP] window [SEP], padded to sequence_length, + the window columns."""
        rows = context.nrows()
        shape = [None, self.sequence_length]

        def join(head, q, middle, c, tail, pad):
            edge = lambda v: tf.fill(tf.stack([rows, 1]), tf.constant(v, tf.int32))
            return tf.concat([edge(head), q, edge(middle), c, edge(tail)], axis=1).to_tensor(
                pad, shape=shape)

        q0, c0 = tf.zeros_like(question, tf.int32), tf.zeros_like(context, tf.int32)
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        return {"token_ids": join(cls, tf.cast(question, tf.int32), sep, context, sep,
                                  self.tokenizer.pad_token_id),
                "segment_ids": join(0, q0, 0, c0 + 1, 1, 0),
                "padding_mask": join(1, q0 + 1, 1, c0 + 1, 1, 0),
                "token_start": join(-1, q0 - 1, -1, starts, -1, -1),
                "token_end": join(-1, q0 - 1, -1, ends, -1, -1),
                "max_context": join(0, q0, 0, is_max, 0, 0)}

    @staticmethod
    def _targets(example, begin, length, offset, first, last, has_answer):
        first, last = tf.gather(first, example), tf.gather(last, example)
        inside = (first >= 0) & (begin <= first) & (last < begin + length)
        as_int = lambda t: tf.cast(t, tf.int32)
        return {"start_positions": as_int(tf.where(inside, first - begin + offset, 0)),
                "end_positions": as_int(tf.where(inside, last - begin + offset, 0)),
                "answer_in_window": as_int(inside),
                "unmappable": as_int(tf.gather(has_answer, example) & (first < 0))}

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                pad_to_multiple_of=1):
        """tf.data of window batches from `x = (questions, contexts)` (lists or tensors) and
        optionally `y = (answer_starts, answer_ends)` (characters, -1 = no answer) and one
        `sample_weight` a question: `inputs` (the three model inputs) or `call`'s `(inputs,
        {"start_logits": ..., "end_logits": ...}[, weights])`, re-batched to `batch_size`
        windows, each batch with targets cut to its longest row. A `tf.data.Dataset` `x` is taken as
        batches of raw `((questions, contexts), y[, sample_weight])` or `(questions,
        contexts)`."""
        from kbert.models.backbone import INPUT_KEYS  # text sits above models; lazy: no cycle

        if y is None and sample_weight is not None:
            raise ValueError("sample_weight weighs answers: give y too.")
        if not isinstance(x, tf.data.Dataset):
            check_example_counts(x=x, y=None if y is None else tuple(y),  # (starts, ends)
                                 sample_weight=sample_weight)
        if y is not None:  # one [batch, 2] tensor, which tf.data slices as one label
            y = tf.stack([tf.constant(v, tf.int32) for v in y], axis=1)

        def windows(*parts):
            if not isinstance(parts[0], tuple):  # a dataset's (questions, contexts) alone
                parts = (parts,)
            x, *labels = parts
            if not labels:
                return {k: v for k, v in traced(self)(x).items() if k in INPUT_KEYS}
            y, *weight = labels
            return traced(self)(x, y if isinstance(y, tuple) else (y[:, 0], y[:, 1]), *weight)

        raw = batched_dataset(x, y, sample_weight, lambda *parts: parts, batch_size, shuffle,
                              seed)
        batches = raw.map(windows, num_parallel_calls=tf.data.AUTOTUNE).unbatch().batch(
            batch_size)
        if isinstance(batches.element_spec, tuple):  # with targets: `fit`, `evaluate`
            cut = lambda inputs, *rest: (trim_to_longest(inputs, pad_to_multiple_of),) + rest
            batches = batches.map(cut, num_parallel_calls=tf.data.AUTOTUNE)
        # Without, rows stay `sequence_length` long: `predict` joins its batches' logits,
        # which rows of other lengths would make ragged.
        return prefetched(batches)

    def compute_output_spec(self, x, y=None, sample_weight=None):
        window = lambda: keras.KerasTensor((None, self.sequence_length), "int32")  # noqa: E731
        row = lambda dtype="int32": keras.KerasTensor((None,), dtype)  # noqa: E731
        if y is None:
            return {**{k: window() for k in WINDOW_KEYS}, "example_index": row()}
        spec = ({k: window() for k in WINDOW_KEYS[:3]},
                {"start_logits": row(), "end_logits": row()})
        return spec + ((row("float32"),) if sample_weight is not None else ())

    def get_config(self):
        config = super().get_config()
        config.update({"sequence_length": self.sequence_length, "doc_stride": self.doc_stride,
                       "max_query_length": self.max_query_length,
                       "max_context_length": self.max_context_length})
        return config
