"""BertSpanPreprocessor: (question, context) strings → SQuAD windows, as graph ops.

`squad_features` of tests/spans/reference_squad.py (a numpy transcription of Google's
run_squad.py) in the graph: same windows, ids, character offsets, max-context flags and targets
(that module's docstring gives the algorithm), so training (tf.data), a Keras model and an
exported SavedModel share it.

No Python loop over examples: the windows of a context after a question of q sub-tokens (cut
to `max_query_length`) are `kbert.text.windows` with room = sequence_length - q - 3.

Each input row gives one or more windows, so the outputs have W ≥ batch rows and
`example_index` says which input row a window came from.

Bounded work per input: a question is cut to the bytes its `max_query_length` sub-tokens can
come from before tokenization (`PreprocessorBase.cap`). A context is not cut to one window, since
it is windowed, but to its first `max_context_length` sub-tokens (default 4,096, several times
the longest SQuAD context: about 30 windows at 384/128), and its text to the bytes those can come
from before tokenization. Answers beyond are not found.
"""

import keras

from kbert.config_checks import whole_number
from kbert.config_checks import RowError
from kbert.text.datasets import batched_dataset, check_example_counts, prefetched
from kbert.text.preprocessor_base import PreprocessorBase, string_batch, traced
from kbert.text.span_answers import (answer_chars, answer_columns, answer_tokens, check_spans,
                                     question_weights)
from kbert.text.tf_libs import tf
from kbert.text.trim import trim_to_longest
from kbert.text.windows import max_context_flags, window_plan

WINDOW_KEYS = ("token_ids", "segment_ids", "padding_mask", "token_start", "token_end",
               "max_context")


def check_lengths(sequence_length, max_query_length, doc_stride):
    """Raises ValueError unless a window holds [CLS] question [SEP] ≥1 context token [SEP].

    Args:
      sequence_length: the window's length.
      max_query_length: the most sub-tokens of a question.
      doc_stride: how far apart windows start.

    Examples:
        >>> from kbert.text.span_preprocessor import check_lengths
        >>> check_lengths(384, 64, 128)
        >>> check_lengths(16, 13, 4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: sequence_length=16 leaves no room for the context after a question of ...
    """
    if max_query_length < 1 or doc_stride < 1:
        raise ValueError(f"max_query_length and doc_stride must be positive, got "
                         f"{max_query_length} and {doc_stride}.")
    if sequence_length - max_query_length - 3 < 1:
        raise ValueError(f"sequence_length={sequence_length} leaves no room for the context "
                         f"after a question of max_query_length={max_query_length} sub-tokens "
                         "and [CLS]/[SEP]/[SEP]; raise sequence_length or lower "
                         "max_query_length.")


def _has_text(lengths, what):
    """An assertion that every row has word pieces (`lengths` > 0), naming the first without:
    a `RowError` when run eagerly (`kbert predict`), an InvalidArgument error in a graph."""
    empty = tf.where(lengths <= 0)[:, 0]
    if tf.executing_eagerly():
        if tf.size(empty):
            raise RowError(f"The {what} of {{where}} is blank (no word piece: it is empty, or "
                           "only spaces or characters the tokenizer drops).", empty[0])
        return tf.no_op()
    return tf.debugging.Assert(tf.size(empty) == 0, [f"{what} of row", empty[:1],
                                                     "is blank (no word piece)"])


@keras.saving.register_keras_serializable(package="kbert")
class BertSpanPreprocessor(PreprocessorBase):
    """Packs (question, context) pairs into SQuAD windows for extractive question answering.

    Google's run_squad.py windowing in graph ops: each context is cut into windows
    `[CLS] question [SEP] context part [SEP]` of `sequence_length` tokens, `doc_stride` apart,
    so one input row gives one or more windows (W ≥ batch rows; `example_index` says which
    row each came from). `BertSpanLabeler` trains on and answers from them.

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length: the length of a window, special tokens included.
      doc_stride: how far apart windows start, in context sub-tokens.
      max_query_length: the most sub-tokens kept of a question; None for run_squad.py's 64,
        or half a window where that is too long.
      max_context_length: the sub-tokens of a context that are windowed (the rest is cut).
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Call arguments:
      x: a tuple `(questions, contexts)` of string batches [batch].
      y: None, or the answers' character spans `(answer_starts, answer_ends)` (int [batch],
        [start, end) in code points of the context, -1 for no answer), or the dict form of
        `span_answers.ANSWER_FORM`.
      sample_weight: one weight per question (with `y` only), or None.

    Returns:
      Without `y`, the dict of windows `windows` returns. With `y`, what `fit` trains on:
      `(inputs, {"start_logits": start positions, "end_logits": end positions}[, weights])`,
      `inputs` the model's three inputs, for the windows whose answer covers a sub-token.

    Examples:
        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertSpanPreprocessor(tokenizer, sequence_length=16,
        ...                                           doc_stride=4, max_query_length=4)
        >>> question, context = "Who wrote it?", "The book was written by Jane Austen in 1813."
        >>> windows = preprocessor(([question], [context]))
        >>> windows["example_index"].numpy().tolist()  # two windows of the one context
        [0, 0]
        >>> windows["token_ids"].numpy().tolist()[1]
        [101, 2040, 2626, 2009, 1029, 102, 2011, 4869, 24177, 1999, 12169, 1012, 102, 0, 0, 0]
        >>> inputs, targets = preprocessor(([question], [context]), ([24], [35]))  # Jane Austen
        >>> targets["start_logits"].numpy().tolist(), targets["end_logits"].numpy().tolist()
        ([11, 7], [12, 8])
    """

    def __init__(self, tokenizer, sequence_length=384, doc_stride=128, max_query_length=None,
                 max_context_length=4096, **kwargs):
        super().__init__(tokenizer, **kwargs)
        sequence_length = whole_number("sequence_length", sequence_length, 1)
        if max_query_length is None:
            max_query_length = max(1, min(64, (sequence_length - 3) // 2))
        doc_stride = whole_number("doc_stride", doc_stride, 1)
        max_query_length = whole_number("max_query_length", max_query_length, 1)
        check_lengths(sequence_length, max_query_length, doc_stride)
        self.max_context_length = whole_number("max_context_length", max_context_length, 1)
        # Keras would cast float answer positions to the layer's int32 dtype silently.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.sequence_length = sequence_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length

    def build(self, *shapes, **kwargs):
        self.built = True  # no weights; the tokenizer's tables exist from its constructor

    def call(self, x, y=None, sample_weight=None):
        """`x = (questions, contexts)` → `windows(*x)`, every column answers are decoded by.

        With `y = (answer_starts, answer_ends)` (keras-hub's form; or by output name,
        `span_answers.ANSWER_FORM`), so that `dataset.map(preprocessor)` packs elements
        `((questions, contexts), (answer_starts, answer_ends)[, sample_weight])` for `fit`:
        `(inputs, {"start_logits": start positions, "end_logits": end positions}[, weights])`,
        the windows whose answer covers a sub-token (as run_squad.py trains), each weighted by
        its question's `sample_weight`.
        """
        if not (isinstance(x, (tuple, list)) and len(x) == 2
                and not any(isinstance(part, (str, bytes)) for part in x)):
            raise TypeError("BertSpanPreprocessor takes x = (questions, contexts), a tuple of "
                            f"two string batches; got {type(x).__name__} {x!r:.80}.")
        if y is None:
            if sample_weight is not None:
                raise ValueError("sample_weight weighs answers: give y = (answer_starts, "
                                 "answer_ends) too.")
            return self.windows(*x)
        out = self.windows(*x, *answer_columns(y))
        keep = tf.equal(out["unmappable"], 0)
        parts = ({k: out[k] for k in WINDOW_KEYS[:3]},
                 {"start_logits": out["start_positions"], "end_logits": out["end_positions"]})
        if sample_weight is not None:
            parts += (tf.gather(question_weights(sample_weight, x[1]), out["example_index"]),)
        return tf.nest.map_structure(lambda t: tf.boolean_mask(t, keep), parts)

    def windows(self, questions, contexts, answer_starts=None, answer_ends=None,
                require_questions=False):
        """The windows of `(questions, contexts)`, with targets when answers are given.

        Args:
          questions: strings [batch].
          contexts: strings [batch].
          answer_starts, answer_ends: None, or int [batch]: each answer's [start, end) in code
            points of its context, -1 for no answer (other spans fail `check_spans`).
          require_questions: refuse a question without a word piece (empty, blank, or only
            characters the tokenizer drops), which asks nothing: an InvalidArgument error
            naming its row rather than a span of the context (for requests; datasets are read
            as they are). A context without one has no answer ("", score -inf).

        Returns:
          A dict of W rows: int32 [W, sequence_length] `token_ids`, `segment_ids`,
          `padding_mask`, `token_start` and `token_end` (each context token's characters in
          its context, -1 elsewhere), `max_context` (1 where this window is the token's best),
          and int32 [W] `example_index`; with answers also int32 [W] `start_positions`,
          `end_positions` (0 = [CLS]), `answer_in_window` and `unmappable` (1 for every window
          of a row whose answer covers no sub-token: train without those, as run_squad.py
          does).

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertSpanPreprocessor(tokenizer, sequence_length=16,
            ...                                           doc_stride=4, max_query_length=4)
            >>> out = preprocessor.windows(["Who wrote it?"],
            ...                            ["The book was written by Jane Austen in 1813."], [24], [35])
            >>> out["token_start"].numpy().tolist()[1]
            [-1, -1, -1, -1, -1, -1, 21, 24, 29, 36, 39, 43, -1, -1, -1, -1]
            >>> out["start_positions"].numpy().tolist(), out["answer_in_window"].numpy().tolist()
            ([11, 7], [1, 1])
        """
        if (answer_starts is None) != (answer_ends is None):
            raise ValueError("Give both answer_starts and answer_ends, or neither.")
        questions = string_batch(questions, type(self).__name__, "questions")
        contexts = string_batch(contexts, type(self).__name__, "contexts")
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
            answer = check_spans(answer_chars(answer_starts, "answer_starts", rows),
                                 answer_chars(answer_ends, "answer_ends", rows),
                                 questions, contexts)
            first, last = answer_tokens(starts, ends, *answer)
            out.update(self._targets(example, begin, length, tf.gather(q, example) + 2,
                                     first, last, answer[0] >= 0))
        return out

    def _pack(self, question, context, starts, ends, is_max):
        """[CLS] question [SEP] window [SEP], padded to sequence_length, + the window columns
        (`WINDOW_KEYS`), joined as one [rows, tokens, 6] tensor: one ragged concat, not one a
        column, keeps small the graph every tf.data iterator instantiates."""
        rows = context.nrows()
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        edge = lambda *column: tf.broadcast_to(tf.constant(column, tf.int32), tf.stack(
            [rows, 1, len(WINDOW_KEYS)]))
        columns = lambda part, *column: part.with_flat_values(tf.stack(column, axis=-1))
        q, c = tf.cast(question.flat_values, tf.int32), context.flat_values
        q0, c0 = tf.zeros_like(q), tf.zeros_like(c)
        joined = tf.concat([edge(cls, 0, 1, -1, -1, 0),
                            columns(question, q, q0, q0 + 1, q0 - 1, q0 - 1, q0),
                            edge(sep, 0, 1, -1, -1, 0),
                            columns(context, c, c0 + 1, c0 + 1, starts.flat_values,
                                    ends.flat_values, is_max.flat_values),
                            edge(sep, 1, 1, -1, -1, 0)], axis=1)
        padded = joined.to_tensor(tf.constant([self.tokenizer.pad_token_id, 0, 0, -1, -1, 0]),
                                  shape=[None, self.sequence_length, len(WINDOW_KEYS)])
        return dict(zip(WINDOW_KEYS, tf.unstack(padded, axis=-1)))

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
        """A tf.data.Dataset of window batches: what `BertSpanLabeler.fit` / `predict` run on.

        Windows are re-batched to `batch_size` windows; each batch with targets is cut to its
        longest row (without, rows stay `sequence_length` long, so that `predict`'s logits
        of all batches line up).

        Args:
          x: `(questions, contexts)`, lists or tensors; or a `tf.data.Dataset` of batches of
            raw `((questions, contexts), y[, sample_weight])` or `(questions, contexts)`.
          y: None, or `(answer_starts, answer_ends)` in characters, -1 for no answer (or the
            dict form of `span_answers.ANSWER_FORM`).
          sample_weight: one weight per question (with `y` only), or None.
          batch_size: windows per batch.
          shuffle: shuffle the questions (afresh every epoch).
          seed: the shuffle's seed.
          pad_to_multiple_of: round each batch's length up to a multiple of this (for XLA).

        Returns:
          A `tf.data.Dataset` of `inputs` (the three model inputs) or of `call`'s `(inputs,
          {"start_logits": ..., "end_logits": ...}[, weights])`.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertSpanPreprocessor(tokenizer, sequence_length=16,
            ...                                           doc_stride=4, max_query_length=4)
            >>> x = (["Who wrote it?"], ["The book was written by Jane Austen in 1813."])
            >>> inputs, targets = next(iter(preprocessor.dataset(x, ([24], [35]))))
            >>> tuple(inputs["token_ids"].shape), targets["start_logits"].numpy().tolist()
            ((2, 16), [11, 7])
        """
        from kbert.config import INPUT_KEYS

        if y is None and sample_weight is not None:
            raise ValueError("sample_weight weighs answers: give y too.")
        if not isinstance(x, tf.data.Dataset):
            y = None if y is None else answer_columns(y)
            check_example_counts(x=x, y=y, sample_weight=sample_weight)
        if y is not None:  # one [batch, 2] tensor, which tf.data slices as one label
            y = tf.stack([tf.constant(v, tf.int32) for v in y], axis=1)

        def windows(*parts):
            if not isinstance(parts[0], tuple):  # a dataset's (questions, contexts) alone
                parts = (parts,)
            x, *labels = parts
            if not labels:
                return {k: v for k, v in traced(self)(x).items() if k in INPUT_KEYS}
            y, *weight = labels
            y = (y[:, 0], y[:, 1]) if tf.is_tensor(y) else answer_columns(y)
            return traced(self)(x, y, *weight)

        raw = batched_dataset(x, y, sample_weight, lambda *parts: parts, batch_size, shuffle,
                              seed)
        batches = raw.map(windows, num_parallel_calls=tf.data.AUTOTUNE).unbatch().batch(
            batch_size)
        if isinstance(batches.element_spec, tuple):  # with targets: `fit`, `evaluate`
            cut = lambda inputs, *rest: (trim_to_longest(inputs, pad_to_multiple_of),) + rest
            batches = batches.map(cut, num_parallel_calls=tf.data.AUTOTUNE)
            if not isinstance(x, tf.data.Dataset):  # counted once, the batches of arrays
                batches = _counted(batches)
        # Without, rows stay `sequence_length` long: `predict` joins its batches' logits,
        # which rows of other lengths would make ragged.
        return prefetched(batches)

    def compute_output_spec(self, x, y=None, sample_weight=None):
        """The `keras.KerasTensor`s `call` returns for symbolic inputs."""
        window = lambda: keras.KerasTensor((None, self.sequence_length), "int32")  # noqa: E731
        row = lambda dtype="int32": keras.KerasTensor((None,), dtype)  # noqa: E731
        if y is None:
            return {**{k: window() for k in WINDOW_KEYS}, "example_index": row()}
        spec = ({k: window() for k in WINDOW_KEYS[:3]},
                {"start_logits": row(), "end_logits": row()})
        return spec + ((row("float32"),) if sample_weight is not None else ())

    def get_config(self):
        """The layer's config: the tokenizer and the windowing settings."""
        config = super().get_config()
        config.update({"sequence_length": self.sequence_length, "doc_stride": self.doc_stride,
                       "max_query_length": self.max_query_length,
                       "max_context_length": self.max_context_length})
        return config


def _counted(dataset):
    """`dataset` with its number of elements known, counted by one pass. Over a dataset of
    unknown size, Keras runs one more step on an empty batch, which its per-output loss
    trackers count as a batch (a loss of n batches is then divided by n + 1)."""
    count = dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    return dataset.apply(tf.data.experimental.assert_cardinality(count))
