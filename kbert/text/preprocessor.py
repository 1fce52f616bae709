"""BertPreprocessor: strings → the fixed-shape int32 inputs a BERT model takes.

Packs `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, gives A segment 0 and B segment 1, truncates
to `sequence_length` and pads with [PAD]. Graph ops only, so it runs in tf.data, inside a model
and in an exported serving signature. Each string is first cut to the bytes its kept tokens can
come from (`kbert.text.preprocessor_base.cap_text`), so a huge input costs what a long one does.

Truncation `"longest_first"` is Google's `_truncate_seq_pair`: drop tokens from the end of the
longer segment, from B when they are equally long, until the pair fits. It has a closed form
(used here, no loop): when the pair is too long, A keeps `min(len_A, max(ceil(m/2), m - len_B))`
tokens of the budget m and B the rest. `"waterfall"` keeps A whole if it can and cuts B first
(questions before contexts, say).

Multiple choice: a pair whose second part is [batch, num_choices] strings packs every
(first, choice) pair and gives outputs [batch, num_choices, sequence_length].

With `return_offsets=True` the output also holds `start_offsets` and `end_offsets`: for every
position, the [start, end) of its token in that segment's original string (bytes or characters,
`offset_unit`; see `BertTokenizer.tokenize_with_offsets`), and -1 for [CLS], [SEP] and padding.
`segment_ids` says which input string a position's offsets refer to.
"""

import keras

from kbert.config_checks import whole_number
from kbert.text.datasets import batched_dataset
from kbert.text.preprocessor_base import PreprocessorBase, traced
from kbert.text.tf_libs import tf
from kbert.text.trim import trim_to_longest

TRUNCATIONS = ("longest_first", "waterfall")
PAIRS_AS_A_TUPLE = (
    "Give pairs as a tuple (texts_a, texts_b) of two lists of strings. A list of lists is "
    "ambiguous: a list of (a, b) pairs, as Hugging Face's tokenizer takes them, would be read "
    "as the two segments, pairing the wrong texts.")


def truncated_lengths(lengths, budget, truncate="longest_first"):
    """How many tokens each segment keeps when packed into `budget` tokens.

    Args:
      lengths: a list of one or two int tensors [batch], each segment's number of tokens.
      budget: the tokens the segments may fill together (the packed length less the special
        tokens).
      truncate: "longest_first" (Google's `_truncate_seq_pair`) or "waterfall" (the first
        segment whole if it fits, then the second).

    Returns:
      A list of int tensors [batch], one per segment.

    Examples:
        >>> import tensorflow as tf
        >>> from kbert.text.preprocessor import truncated_lengths
        >>> lengths = [tf.constant([10, 2]), tf.constant([3, 9])]
        >>> [t.numpy().tolist() for t in truncated_lengths(lengths, 8)]
        [[5, 2], [3, 6]]
        >>> [t.numpy().tolist() for t in truncated_lengths(lengths, 8, "waterfall")]
        [[8, 2], [0, 6]]
    """
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], tf.cast(budget, lengths[0].dtype))]
    la, lb = lengths
    budget = tf.cast(budget, la.dtype)
    if truncate == "waterfall":
        keep_a = tf.minimum(la, budget)
    else:
        half = (budget + 1) // 2  # A gets the odd token: ties are cut from B
        keep_a = tf.where(la + lb <= budget, la,
                          tf.minimum(la, tf.maximum(half, budget - lb)))
    return [keep_a, tf.minimum(lb, budget - keep_a)]


def pack_segments(tokenized, keep, sequence_length, cls_id, sep_id, pad_id):
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded to `sequence_length`.

    Each output position gathers from the segment it falls in: dense ops, which trace much
    faster than ragged concatenation and masking (the packing is traced in every export
    signature and tf.data map).

    Args:
      tokenized: a tuple per segment of ragged [batch, (tokens)] tensors: the ids, and
        optionally their start and end offsets.
      keep: per segment, int [batch]: how many of its first tokens to keep.
      sequence_length: an int, or a scalar tensor for a length chosen per call.
      cls_id, sep_id, pad_id: the ids of [CLS], [SEP] and [PAD].

    Returns:
      A dict of int32 [batch, sequence_length] `token_ids`, `segment_ids`, `padding_mask`
      (and `start_offsets` / `end_offsets` with offsets, -1 at [CLS], [SEP] and padding).

    Examples:
        >>> import tensorflow as tf
        >>> from kbert.text.preprocessor import pack_segments
        >>> a, b = tf.ragged.constant([[7, 8, 9]]), tf.ragged.constant([[5]])
        >>> out = pack_segments([(a,), (b,)], [[2], [1]], 7, cls_id=1, sep_id=2, pad_id=0)
        >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
        ([[1, 7, 8, 2, 5, 2, 0]], [[0, 0, 0, 0, 1, 1, 0]])
    """
    keys = ("token_ids", "start_offsets", "end_offsets")[:len(tokenized[0])]
    batch = tokenized[0][0].nrows(out_type=tf.int32)
    if not isinstance(sequence_length, int):
        sequence_length = tf.cast(sequence_length, tf.int32)
    position = tf.range(sequence_length)[tf.newaxis]  # [1, sequence_length]
    blank = tf.zeros([batch, 1], tf.int32) + tf.zeros_like(position)  # [batch, seq]
    out = {"token_ids": tf.where(position == 0, cls_id, blank + pad_id), "segment_ids": blank,
           "start_offsets": blank - 1, "end_offsets": blank - 1}
    start = tf.ones([batch, 1], tf.int32)  # where the segment's first token goes
    for index, (segment, n) in enumerate(zip(tokenized, keep)):
        n = tf.cast(n, tf.int32)[:, tf.newaxis]
        token = position - start  # which of the segment's tokens a position holds
        inside = (token >= 0) & (token < n)
        for key, values in zip(keys, segment):
            dense = tf.pad(values.to_tensor(), [[0, 0], [0, 1]])  # >= 1 column
            token_or_last = tf.clip_by_value(token, 0, tf.shape(dense)[1] - 1)
            out[key] = tf.where(inside, tf.gather(dense, token_or_last, batch_dims=1),
                                out[key])
        out["token_ids"] = tf.where(token == n, sep_id, out["token_ids"])
        out["segment_ids"] = tf.where(inside | (token == n), index, out["segment_ids"])
        start += n + 1
    out["padding_mask"] = tf.cast(position < start, tf.int32)
    return {k: out[k] for k in ("token_ids", "segment_ids", "padding_mask", *keys[1:])}


@keras.saving.register_keras_serializable(package="kbert")
class BertPreprocessor(PreprocessorBase):
    """Packs text, or pairs of texts, into the fixed-shape int32 inputs of a BERT model.

    Tokenizes, packs `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` (A segment 0, B segment 1),
    truncates to `sequence_length` and pads with [PAD], in graph ops: it runs in tf.data, inside
    a model and in an exported serving signature. Given as `preprocessor=` to a task model
    (`BertClassifier`, ...), it lets `fit` and `predict` take raw text.

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length: the packed length, special tokens included (at least 3).
      truncate: "longest_first" (Google's rule: cut the longer segment first, B on a tie) or
        "waterfall" (keep A whole if it fits and cut B first: questions before contexts).
      return_offsets: also return `start_offsets` and `end_offsets`: each position's token's
        [start, end) in the original string of its segment (`segment_ids` says which), -1 at
        [CLS], [SEP] and padding (see `BertTokenizer.tokenize_with_offsets`).
      offset_unit: the offsets' unit, "byte" or "char" (code points).
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Call arguments:
      x: strings [batch] (a tensor or a list) or one string; a tuple `(texts_a, texts_b)` for
        pairs; or `(questions, choices)` with choices [batch, num_choices] for multiple
        choice.
      y, sample_weight: optional labels and weights, passed through (keras-hub's form, so
        that `dataset.map(preprocessor)` packs `(text, label)` elements).

    Returns:
      A dict of int32 [batch, sequence_length] tensors `token_ids`, `segment_ids`,
      `padding_mask` (1 on real tokens), plus the offsets with `return_offsets`
      ([batch, num_choices, sequence_length] for multiple choice; no batch axis for one
      string). With `y` or `sample_weight`: `(inputs, y[, sample_weight])`.

    Examples:
        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=8)
        >>> out = preprocessor(["The quick brown fox."])
        >>> out["token_ids"].numpy().tolist()
        [[101, 1996, 4248, 2829, 4419, 1012, 102, 0]]
        >>> out["padding_mask"].numpy().tolist()
        [[1, 1, 1, 1, 1, 1, 1, 0]]

        A pair, cut to fit by the longest-first rule:

        >>> out = preprocessor((["The quick brown fox jumped over"], ["the lazy dog"]))
        >>> out["token_ids"].numpy().tolist()
        [[101, 1996, 4248, 2829, 102, 1996, 13971, 102]]
        >>> out["segment_ids"].numpy().tolist()
        [[0, 0, 0, 0, 0, 1, 1, 1]]

        Multiple choice, and offsets:

        >>> out = preprocessor((["Where do cats sleep?"], [["On the bed.", "In a box."]]))
        >>> tuple(out["token_ids"].shape)
        (1, 2, 8)
        >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=8,
        ...                                       return_offsets=True, offset_unit="char")
        >>> out = preprocessor(["Héllo wörld!"])
        >>> out["start_offsets"].numpy().tolist(), out["end_offsets"].numpy().tolist()
        ([[-1, 0, 6, 11, -1, -1, -1, -1]], [[-1, 5, 11, 12, -1, -1, -1, -1]])
    """

    def __init__(self, tokenizer, sequence_length=128, truncate="longest_first",
                 return_offsets=False, offset_unit="byte", **kwargs):
        super().__init__(tokenizer, **kwargs)
        if truncate not in TRUNCATIONS:
            raise ValueError(f"truncate must be one of {TRUNCATIONS}, got {truncate!r}.")
        if offset_unit not in ("byte", "char"):
            raise ValueError(f"offset_unit must be 'byte' or 'char', got {offset_unit!r}.")
        self.sequence_length = whole_number(
            "sequence_length", sequence_length, 3, "an integer of at least 3 ([CLS] A [SEP] B "
            "[SEP] needs room)")
        self.truncate = truncate
        self.return_offsets = bool(return_offsets)
        self.offset_unit = offset_unit

    def _segments(self, inputs):
        if isinstance(inputs, dict):
            raise TypeError("BertPreprocessor takes a string tensor or a tuple (a, b) of them, "
                            "not a dict.")
        if isinstance(inputs, list) and inputs and all(
                isinstance(s, (list, tuple)) and all(isinstance(t, (str, bytes)) for t in s)
                for s in inputs):
            raise ValueError(PAIRS_AS_A_TUPLE)
        if isinstance(inputs, list) and all(isinstance(s, (str, bytes)) for s in inputs):
            inputs = [inputs]  # a Python list of texts is a batch, as in `predict`, not a pair
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"BertPreprocessor packs one or two segments, got {len(segments)}: "
                             "a batch of texts is a list or a tensor; a tuple is a pair "
                             "(texts_a, texts_b).")
        out = []
        for s in segments:
            s = tf.convert_to_tensor(s)
            if s.dtype != tf.string:
                raise TypeError(f"BertPreprocessor expects strings, got dtype {s.dtype.name}.")
            if s.shape.rank == 2 and s.shape[-1] == 1:  # keras.Input(shape=(1,))
                s = tf.squeeze(s, -1)
            out.append(s)
        return out

    def call(self, x, y=None, sample_weight=None):
        """Packs `x`; see the class docstring.

        Given labels or weights too (keras-hub's form, so that `dataset.map(preprocessor)`
        packs elements `(text, label)`), returns `(packed, y, sample_weight)` as
        `keras.utils.pack_x_y_sample_weight` puts them.
        """
        packed = self._pack(x)
        if y is None and sample_weight is None:
            return packed
        return keras.utils.pack_x_y_sample_weight(packed, y, sample_weight)

    def _pack(self, inputs):
        segments = self._segments(inputs)
        if len(segments) == 2 and segments[0].shape.rank:
            segments = _same_count(*segments)
        if len(segments) == 2 and segments[1].shape.rank == 2:
            return self._pack_choices(*segments)
        if len(segments) == 2 and segments[0].shape.rank == 0 and segments[1].shape.rank == 1:
            # One question and its choices: `dataset.map(preprocessor)` before `.batch`.
            packed = self._pack_choices(segments[0][tf.newaxis], segments[1][tf.newaxis])
            return {k: v[0] for k, v in packed.items()}
        scalar = segments[0].shape.rank == 0
        if scalar:
            segments = [tf.expand_dims(s, 0) for s in segments]
        budget = self.sequence_length - len(segments) - 1
        # Only the bytes the kept tokens can come from are tokenized (PreprocessorBase.cap).
        segments = [self.cap(s, budget) for s in segments]
        if self.return_offsets:
            tokenized = [self.tokenizer.tokenize_with_offsets(s, self.offset_unit)
                         for s in segments]
        else:
            tokenized = [(self.tokenizer(s),) for s in segments]
        out = self.pack_tokens(tokenized)
        if scalar:
            out = {k: v[0] for k, v in out.items()}
        return out

    def pack_tokens(self, tokenized, sequence_length=None):
        """Already tokenized segments, cut by this preprocessor's truncation and packed.

        Args:
          tokenized: one or two segments, each a tuple of ragged [batch, (tokens)] tensors:
            the ids, and optionally their start and end offsets.
          sequence_length: None for this preprocessor's own; an int or a scalar tensor picks
            it per call.

        Returns:
          The dict `pack_segments` returns.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=8)
            >>> ids = tokenizer(["The quick brown fox."])
            >>> out = preprocessor.pack_tokens([(ids,)], sequence_length=5)
            >>> out["token_ids"].numpy().tolist()
            [[101, 1996, 4248, 2829, 102]]
        """
        if sequence_length is None:
            sequence_length = self.sequence_length
        budget = sequence_length - len(tokenized) - 1
        keep = truncated_lengths([t[0].row_lengths() for t in tokenized], budget, self.truncate)
        tokenizer = self.tokenizer
        return pack_segments(tokenized, keep, sequence_length, tokenizer.cls_token_id,
                             tokenizer.sep_token_id, tokenizer.pad_token_id)

    def _pack_choices(self, first, choices):
        """[batch] firsts and [batch, num_choices] choices → [batch, num_choices, seq] each."""
        if first.shape.rank != 1:
            raise ValueError(f"Multiple choice takes [batch] questions and [batch, num_choices] "
                             f"choices; got questions of shape {first.shape}.")
        num_choices = tf.shape(choices)[1]
        packed = self._pack((tf.repeat(first, num_choices), tf.reshape(choices, [-1])))
        return {k: tf.reshape(v, [-1, num_choices, self.sequence_length])
                for k, v in packed.items()}

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                pad_to_multiple_of=1):
        """A tf.data.Dataset of packed batches of raw text: what `BertTask.fit` / `predict`
        run on.

        Each batch is cut to its longest row.

        Args:
          x: strings, a pair `(texts_a, texts_b)` of them, or `(questions, choices)`; or a
            `tf.data.Dataset` of batches of raw `x`, `(x, y)` or `(x, y, sample_weight)`.
          y: labels (numbers: map label names to ids first), or None.
          sample_weight: one weight per example, or None.
          batch_size: examples per batch.
          shuffle: shuffle the examples (afresh every epoch).
          seed: the shuffle's seed.
          pad_to_multiple_of: round each batch's length up to a multiple of this (for XLA,
            which compiles once per shape).

        Returns:
          A `tf.data.Dataset` of `inputs`, `(inputs, y)` or `(inputs, y, sample_weight)`.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=16)
            >>> dataset = preprocessor.dataset(["Great film!", "Dull.", "Fine."], [1, 0, 1],
            ...                                batch_size=2)
            >>> inputs, labels = next(iter(dataset))
            >>> tuple(inputs["token_ids"].shape), labels.numpy().tolist()
            ((2, 5), [1, 0])
        """

        def pack(x, *rest):
            return (trim_to_longest(traced(self)(x), pad_to_multiple_of),) + rest

        if isinstance(x, tf.data.Dataset):
            _refuse_text_labels(x.element_spec)
        return batched_dataset(x, y, sample_weight, pack, batch_size, shuffle, seed)

    def compute_output_spec(self, inputs):
        """The `keras.KerasTensor`s `call` returns for symbolic `inputs`."""
        first = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        batch = tuple(first.shape[:1])
        if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and len(inputs[1].shape) == 2 \
                and inputs[1].shape[-1] != 1:
            batch += tuple(inputs[1].shape[1:])  # multiple choice
        shape = batch + (self.sequence_length,)
        keys = ["token_ids", "segment_ids", "padding_mask"]
        if self.return_offsets:
            keys += ["start_offsets", "end_offsets"]
        return {k: keras.KerasTensor(shape, dtype="int32") for k in keys}

    def get_config(self):
        """The layer's config: the tokenizer and the packing settings."""
        config = super().get_config()
        config.update({
            "sequence_length": self.sequence_length,
            "truncate": self.truncate,
            "return_offsets": self.return_offsets,
            "offset_unit": self.offset_unit,
        })
        return config


def _refuse_text_labels(spec):
    """A raw dataset's elements are `(x, y[, sample_weight])`, as Keras reads them: string
    labels are label names, or the second texts of pairs, which go one level deeper."""
    if (isinstance(spec, tuple) and len(spec) > 1 and isinstance(spec[1], tf.TensorSpec)
            and spec[1].dtype == tf.string):
        raise ValueError("The dataset's labels must be numbers (class ids or targets), got "
                         "string; map label names to ids first (`dataset.map`). If the strings "
                         "are the second texts of pairs: Keras reads an element as (x, y), so "
                         "a dataset of pairs yields ((texts_a, texts_b), labels), or "
                         "((texts_a, texts_b),) to predict.")


def _same_count(first, second):
    """A pair's two batches (texts_a and texts_b, or questions and their choices), checked to
    hold as many examples: ragged packing would fail on shapes deep in the graph."""
    a, b = first.shape[0], second.shape[0]
    message = "The two parts of a pair (texts_a, texts_b; or questions, choices) differ in number"
    if a is not None and b is not None:
        if a != b:
            raise ValueError(f"{message}: {a} and {b}.")
        return first, second
    check = tf.debugging.assert_equal(tf.shape(first)[0], tf.shape(second)[0], message=message)
    with tf.control_dependencies([check]):
        return tf.identity(first), tf.identity(second)
