"""BertTokenPreprocessor: pre-split words → token-tagging features, as graph ops.

`conll_features` of tests/spans/reference_conll.py (a numpy reference) in the graph, so
training (tf.data), a Keras model and an exported SavedModel share it: the words of a sentence
are joined by single spaces and tokenized once with character offsets; each sub-token
belongs to the word whose start is the last one at or before the sub-token's start; only a
word's first sub-token carries its label (weight 1), [CLS], [SEP], padding and the other sub-
tokens weight 0. A sentence is cut at `sequence_length - 2` sub-tokens; the words cut off have
no first sub-token in the window (`word_index` never names them), which
`kbert.text.entity_decoding` reads as "O". Tagging a longer text, `windows` packs it in rows as
`BertSpanPreprocessor` packs a SQuAD context, each word tagged in the row that gives it the most
context.

Raw text goes through `split_words` first (`kbert.text.word_split`; `split_text` cuts it first
to the bytes the window's sub-tokens can come from, and `call` cuts the joined words the same
way: `PreprocessorBase.cap`). Unlike `conll_features`, a sentence with no words is not an error
here (a served request may be empty): it packs to [CLS] [SEP].
"""

import keras
import numpy as np

from kbert.config_checks import whole_number
from kbert.text.preprocessor_base import PreprocessorBase, example_weights, traced
from kbert.text.tf_libs import tf
from kbert.text.windows import max_context_flags, window_plan
from kbert.text.word_split import split_words


OUTPUT_KEYS = ("token_ids", "segment_ids", "padding_mask", "word_index")


def _first_sub_tokens(word_starts, token_starts):
    """Per sub-token (ragged [batch, None]) the index of the word it begins, or -1 for a
    sub-token that does not begin its word: `bisect_right(word_starts, start) - 1`, kept
    where it differs from the previous sub-token's word (offsets only grow along a row)."""
    big = tf.int32.max  # padding that keeps each row of starts sorted
    sorted_starts = word_starts.to_tensor(big)
    dense = token_starts.to_tensor(big)
    word = tf.searchsorted(sorted_starts, dense, side="right", out_type=tf.int32) - 1
    word = tf.RaggedTensor.from_tensor(word, lengths=token_starts.row_lengths()).flat_values
    position = tf.range(tf.size(word, out_type=tf.int64))
    row_first = tf.equal(position, tf.gather(token_starts.row_splits,
                                             token_starts.value_rowids()))
    previous = tf.where(row_first, -1, tf.roll(word, 1, 0))
    first = (word >= 0) & tf.not_equal(word, previous)
    return token_starts.with_flat_values(tf.where(first, word, -1))


@keras.saving.register_keras_serializable(package="kbert")
class BertTokenPreprocessor(PreprocessorBase):
    """Packs pre-split words, and their labels, for token tagging (named entities, CoNLL).

    The words of a sentence are joined by single spaces and tokenized; only a word's first
    sub-token carries its label (weight 1), [CLS], [SEP], padding and the other sub-tokens
    weight 0. A sentence is cut at `sequence_length - 2` sub-tokens; `windows` tags longer
    texts. Raw text is split into words by `split_text` (or `split_words`) first. A sentence
    with no words packs to `[CLS] [SEP]`. `BertTokenClassifier` trains on and tags with it.

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length: the packed length, [CLS] and [SEP] included.
      doc_stride: how far apart `windows` start, in sub-tokens (default: half a row, so that
        each word has about a quarter row of context on each side, where the text has it).
      max_context_length: the sub-tokens of a text that `windows` tag (the rest is "O").
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Call arguments:
      words: ragged strings [batch, (words)] (a tensor or a list of word lists); a 1-D string
        tensor is one sentence (outputs without the batch axis), a dense 2-D one a batch whose
        every entry is a word.
      labels: None, or one int label per word, ragged [batch, (words)].
      sample_weight: one weight per sentence (with `labels` only), or None.

    Returns:
      Without labels, a dict of int32 [batch, sequence_length] `token_ids`, `segment_ids` (all
      0), `padding_mask` and `word_index` (the word a first sub-token begins, -1 elsewhere).
      With labels, `(inputs, labels, label_weights)`: the model's three inputs, each word's
      label on its first sub-token (0 elsewhere), and float32 weights, 1 there (times the
      sentence's `sample_weight`), 0 elsewhere.

    Examples:
        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertTokenPreprocessor(tokenizer, sequence_length=8)
        >>> out = preprocessor([["Unaffable", "Austen", "wrote"]])
        >>> out["token_ids"].numpy().tolist()
        [[101, 14477, 20961, 3468, 24177, 2626, 102, 0]]
        >>> out["word_index"].numpy().tolist()
        [[-1, 0, -1, -1, 1, 2, -1, -1]]
        >>> inputs, labels, weights = preprocessor([["Unaffable", "Austen", "wrote"]], [[3, 1, 0]])
        >>> labels.numpy().tolist()
        [[0, 3, 0, 0, 1, 0, 0, 0]]
        >>> weights.numpy().tolist()
        [[0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]]
    """

    def __init__(self, tokenizer, sequence_length=128, doc_stride=None, max_context_length=4096,
                 **kwargs):
        super().__init__(tokenizer, **kwargs)
        sequence_length = whole_number("sequence_length", sequence_length, 3,
                                       "an integer of at least 3 ([CLS] word [SEP])")
        if doc_stride is None:
            doc_stride = max(1, (sequence_length - 2) // 2)
        self.doc_stride = whole_number("doc_stride", doc_stride, 1)
        self.max_context_length = whole_number("max_context_length", max_context_length, 1)
        # Keras would cast float labels to the layer's int32 and refuse Python lists: take the
        # inputs as given, so that `_ragged` can check them.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.sequence_length = sequence_length

    def build(self, words_shape=None, labels_shape=None):
        """Marks the layer built: it has no weights."""
        self.built = True  # no weights; the tokenizer's tables exist from its constructor

    @staticmethod
    def _ragged(x, what, dtypes):
        if not isinstance(x, tf.RaggedTensor):
            x = tf.ragged.constant(x) if isinstance(x, (list, tuple)) else tf.convert_to_tensor(x)
        if x.dtype not in dtypes:
            raise TypeError(f"BertTokenPreprocessor expects {what} of dtype "
                            f"{' or '.join(d.name for d in dtypes)}, got {x.dtype.name}.")
        single = x.shape.rank == 1
        if single:
            x = x[tf.newaxis]
        if not isinstance(x, tf.RaggedTensor):
            x = tf.RaggedTensor.from_tensor(x) if x.shape.rank == 2 else x
        if x.shape.rank != 2:
            raise ValueError(f"BertTokenPreprocessor expects {what} of shape [batch, None] "
                             f"(or one sentence [None]), got shape {x.shape}.")
        return x, single

    def call(self, words, labels=None, sample_weight=None):
        """Packs `words`; see the class docstring.

        Without labels: the `OUTPUT_KEYS` of the words, what a tagger's export decodes by.
        With labels, keras-hub's form, so that `dataset.map(preprocessor)` packs elements
        `(words, labels[, sample_weight])` for `fit`: `(inputs, labels, label_weights)`.
        """
        if labels is None:
            if sample_weight is not None:
                raise ValueError("sample_weight weighs labels: give the labels too.")
            return self._features(words)
        features = self._features(words, labels)
        weights = features["label_weights"]
        if sample_weight is not None:
            sentences = tf.size(weights) // tf.shape(weights)[-1]  # [seq]: one sentence
            weights *= tf.reshape(example_weights(sample_weight, sentences, "sentence"),
                                  [-1, 1][2 - weights.shape.rank:])
        return ({k: features[k] for k in OUTPUT_KEYS[:3]}, features["labels"], weights)

    def _features(self, words, labels=None):
        words, single, ids, word_index = self._pieces(words, self.sequence_length - 2)
        pack = self._packer(ids)
        out = self._rows(pack, ids, word_index)
        if labels is not None:
            out.update(self._labels(labels, words, word_index, pack))
        return {k: v[0] for k, v in out.items()} if single else out

    def windows(self, words):
        """The words of texts of any length, packed in overlapping windows to be tagged.

        run_squad.py's windows over the first `max_context_length` sub-tokens,
        `sequence_length - 2` a window and `doc_stride` apart (`kbert.text.windows`). A text
        that fits one row gives that row, as `call` packs it.

        Args:
          words: as `call` takes them, without labels.

        Returns:
          A dict of W ≥ batch rows: `call`'s four outputs, with `word_index` naming a word
          only in the window where its first sub-token has the most context (so that every
          word is tagged once), and int32 [W] `example_index`, the input row of each window.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertTokenPreprocessor(tokenizer, sequence_length=6,
            ...                                            doc_stride=2)
            >>> out = preprocessor.windows([["a", "b", "c", "d", "e", "f"]])
            >>> out["example_index"].numpy().tolist()
            [0, 0]
            >>> out["word_index"].numpy().tolist()
            [[-1, 0, 1, 2, -1, -1], [-1, -1, 3, 4, 5, -1]]
        """
        # n pieces come from n words at most: the text beyond is never tokenized.
        words, _ = self._ragged(words, "words", (tf.string,))
        _, _, ids, word_index = self._pieces(words[:, :self.max_context_length],
                                             self.max_context_length)
        ids, word_index = (t[:, :self.max_context_length] for t in (ids, word_index))
        n = ids.row_lengths()
        example, begin, length = window_plan(n, self.sequence_length - 2, self.doc_stride)
        positions, is_max = max_context_flags(example, begin, length, n)
        at = (tf.gather(ids.row_splits, tf.gather(example, positions.value_rowids()))
              + positions.flat_values)  # the flat index of each window token in `ids`
        ids = positions.with_flat_values(tf.gather(ids.flat_values, at))
        word_index = positions.with_flat_values(tf.where(
            is_max.flat_values, tf.gather(word_index.flat_values, at), -1))
        out = self._rows(self._packer(ids), ids, word_index)
        out["example_index"] = tf.cast(example, tf.int32)
        return out

    def _pieces(self, words, max_tokens):
        """(words, single, ids, word_index): the words as ragged [batch, None] (and whether
        one sentence was given), their joined text's sub-token ids, the text cut first to the
        bytes `max_tokens` of them can come from, and each sub-token's `_first_sub_tokens`."""
        words, single = self._ragged(words, "words", (tf.string,))
        words = words.with_flat_values(tf.strings.unicode_transcode(
            words.flat_values, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD))
        # Each word's start in the joined text: characters (word + space) before it in its row.
        chars = tf.strings.length(words.flat_values, unit="UTF8_CHAR") + 1
        before = tf.cumsum(chars, exclusive=True)
        row_base = tf.gather(tf.concat([before, [tf.reduce_sum(chars)]], 0), words.row_splits)
        word_starts = words.with_flat_values(
            before - tf.gather(row_base, words.value_rowids()))
        # Each word with its space, joined: TensorFlow's ragged `reduce_join` drops a row's
        # leading empty strings with their separators, which shifted every word's start.
        spaced = words.with_flat_values(words.flat_values + " ")
        text = self.cap(tf.strings.reduce_join(spaced, axis=-1), max_tokens)
        ids, starts, _ = self.tokenizer.tokenize_with_offsets(text, "char")
        return words, single, ids, _first_sub_tokens(word_starts, starts)

    def _packer(self, ids):
        """`pack(values, first, last, pad)`: `[first] values[:room] [last]`, padded to
        `sequence_length`, for ragged values of `ids`'s rows (dense ops: ragged ones trace
        slowly)."""
        room = self.sequence_length - 2
        kept = tf.minimum(ids.row_lengths(), room)[:, tf.newaxis]  # sub-tokens in the row
        at_last = tf.range(self.sequence_length, dtype=kept.dtype)[tf.newaxis] == kept + 1

        def pack(values, first, last, pad):
            cast = lambda v: tf.cast(v, values.dtype)  # noqa: E731
            body = values.to_tensor(cast(pad), shape=[None, room])
            column = tf.zeros_like(body[:, :1])
            packed = tf.concat([column + cast(first), body, column + cast(pad)], axis=1)
            return tf.where(at_last, cast(last), packed)

        return pack

    def _rows(self, pack, ids, word_index):
        tok = self.tokenizer
        return {"token_ids": pack(ids, tok.cls_token_id, tok.sep_token_id, tok.pad_token_id),
                "segment_ids": pack(tf.zeros_like(ids), 0, 0, 0),
                "padding_mask": pack(tf.ones_like(ids), 1, 1, 0),
                "word_index": pack(word_index, -1, -1, -1)}

    def split_text(self, text, tokens=None):
        """Raw strings split into words, as `call` and `windows` take them.

        `split_words(text)`, the text first cut to the bytes its first `tokens` sub-tokens can
        come from.

        Args:
          text: strings [batch].
          tokens: None for one row's sub-tokens (what `dataset` splits); a tagger splits
            `max_context_length`'s for its `windows`.

        Returns:
          A tuple `(words, starts, ends, text)`: words ragged string [batch, (words)], each
          word's [start, end) in characters of `text`, and `text` itself with invalid UTF-8
          replaced (what the offsets index).

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertTokenPreprocessor(tokenizer, sequence_length=8)
            >>> words, starts, ends, _ = preprocessor.split_text(["Jane Austen wrote Emma."])
            >>> words.to_list()
            [[b'Jane', b'Austen', b'wrote', b'Emma', b'.']]
            >>> starts.to_list(), ends.to_list()
            ([[0, 5, 12, 18, 22]], [[4, 11, 17, 22, 23]])
        """
        return split_words(self.cap(text, tokens or self.sequence_length - 2))

    def _labels(self, labels, words, word_index, pack):
        labels, _ = self._ragged(labels, "labels", (tf.int32, tf.int64))
        check = tf.debugging.assert_equal(
            labels.row_lengths(), words.row_lengths(),
            message="labels must hold one label per word")
        with tf.control_dependencies([check]):
            flat = tf.cast(tf.identity(labels.flat_values), tf.int32)
        is_first = word_index >= 0
        row_start = tf.gather(labels.row_splits, word_index.value_rowids())
        at = row_start + tf.cast(tf.maximum(word_index.flat_values, 0), tf.int64)
        # Every row with sub-tokens has words, so `at` is a valid index even where -1 was.
        picked = tf.where(is_first.flat_values, tf.gather(flat, at), 0)
        return {"labels": pack(word_index.with_flat_values(picked), 0, 0, 0),
                "label_weights": pack(tf.cast(is_first, tf.float32), 0, 0, 0)}

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                pad_to_multiple_of=1):
        """A tf.data.Dataset of packed batches: what `BertTask.fit` / `predict` run on.

        Each batch with labels is cut to its longest row. Without `y` the batches keep the
        full `sequence_length`, so that `predict`'s logits of all batches concatenate and line
        up with this layer's `word_index`.

        Args:
          x: word lists, or raw strings (split by `split_words`), or a `tf.data.Dataset` of
            such raw batches (with their labels and weights).
          y: one label id per word, or None.
          sample_weight: one weight per sentence, which multiplies its words' weights; or None.
          batch_size: sentences per batch.
          shuffle: shuffle the sentences (afresh every epoch).
          seed: the shuffle's seed.
          pad_to_multiple_of: round each batch's length up to a multiple of this (for XLA).

        Returns:
          A `tf.data.Dataset` of `(inputs, labels, label_weights)`, or of `(inputs,)` without
          `y`.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertTokenPreprocessor(tokenizer, sequence_length=16)
            >>> dataset = preprocessor.dataset([["Jane", "Austen"], ["Emma"]], [[1, 2], [1]])
            >>> inputs, labels, weights = next(iter(dataset))
            >>> tuple(inputs["token_ids"].shape), labels.numpy().tolist()
            ((2, 4), [[0, 1, 2, 0], [0, 1, 0, 0]])
        """
        from kbert.config import INPUT_KEYS
        from kbert.text.datasets import batched_dataset, check_example_counts
        from kbert.text.trim import trim_to_longest

        if y is None and sample_weight is not None:
            raise ValueError("sample_weight weighs labels: give y too.")
        if not isinstance(x, tf.data.Dataset):
            check_example_counts(x=x, y=y, sample_weight=sample_weight)
        if isinstance(x, (list, tuple)):
            _check_words(x, y)
            texts = all(isinstance(v, (str, bytes)) for v in x)
            x = tf.constant(list(x), tf.string) if texts else tf.ragged.constant(x, tf.string)
        if y is not None and not isinstance(y, tf.RaggedTensor):
            y = tf.ragged.constant(y, tf.int32)

        def pack(x, *rest):
            if not isinstance(x, tf.RaggedTensor) and x.shape.rank == 1:
                x = self.split_text(x)[0]  # raw strings
            if not rest:
                features = traced(self)(x)
                return ({k: features[k] for k in INPUT_KEYS},)
            inputs, labels, weights = traced(self)(x, *rest)
            cut = trim_to_longest({**inputs, "labels": labels, "weights": weights},
                                  pad_to_multiple_of)
            return {k: cut[k] for k in INPUT_KEYS}, cut["labels"], cut["weights"]

        if not isinstance(x, tf.data.Dataset):  # batched here: `batched_dataset` (numpy
            parts = tuple(p for p in (x, y, sample_weight) if p is not None)  # y) takes no
            x = tf.data.Dataset.from_tensor_slices(parts)  # ragged labels
            if shuffle:
                x = x.shuffle(int(x.cardinality()), seed=seed, reshuffle_each_iteration=True)
            x, y, sample_weight = x.batch(batch_size), None, None
        return batched_dataset(x, y, None, pack, batch_size, shuffle, seed)

    def compute_output_spec(self, words, labels=None, sample_weight=None):
        """The `keras.KerasTensor`s `call` returns for symbolic inputs."""
        shape = tuple(words.shape[:1]) + (self.sequence_length,)
        if labels is None:
            return {k: keras.KerasTensor(shape, dtype="int32") for k in OUTPUT_KEYS}
        return ({k: keras.KerasTensor(shape, dtype="int32") for k in OUTPUT_KEYS[:3]},
                keras.KerasTensor(shape, dtype="int32"), keras.KerasTensor(shape, dtype="float32"))

    def get_config(self):
        """The layer's config: the tokenizer and the packing settings."""
        config = super().get_config()
        config.update({"sequence_length": self.sequence_length, "doc_stride": self.doc_stride,
                       "max_context_length": self.max_context_length})
        return config


def _check_words(sentences, labels=None):
    """Raw strings or word lists hold text only (TensorFlow's "mixed types" error names no
    sentence, and a None would not be a word), and a word list as many labels as words (the
    graph's own check names no sentence)."""
    for n, row in enumerate(sentences):
        if isinstance(row, (str, bytes)):
            continue
        if not isinstance(row, (list, tuple, np.ndarray)):
            raise TypeError(f"Sentence {n}: give a string or a list of words; got {row!r}.")
        for k, word in enumerate(row):
            if not isinstance(word, (str, bytes)):
                raise TypeError(f"Sentence {n}: give words as strings; got {word!r} at word "
                                f"{k}.")
        tags = labels[n] if isinstance(labels, (list, tuple)) else None
        if isinstance(tags, (list, tuple, np.ndarray)) and len(tags) != len(row):
            raise ValueError(f"Sentence {n} has {len(row)} words and {len(tags)} labels: give "
                             "one label per word.")
