"""BertTokenizer: Google's BERT tokenization as a Keras layer made of TensorFlow graph ops.

Why in-graph: the same layer then runs in tf.data, inside a model, and in an exported SavedModel
served by stock TensorFlow Serving (TF core + tensorflow-text ops only, no Python callbacks), so
serving sees exactly the ids training saw.

What it reproduces (Google's `tokenization.py`, `FullTokenizer`):
  1. Invalid UTF-8 bytes are dropped (Google decodes bytes with `errors="ignore"`). kbert decodes
     each invalid sequence to U+FFFD, which step 2 removes: the same result, and a defined one.
  2. Cleaning: NUL, U+FFFD and control/format characters (Cc, Cf; not \\t \\n \\r) are deleted;
     whitespace (\\t \\n \\r, Zs, and what Python's `str.split` also splits on) becomes a space.
  3. CJK ideographs (Google's code point ranges) become single-character words.
  4. Uncased only: `str.lower` (final-sigma rule included), NFD, and accents (Mn) stripped.
  5. Every punctuation character (Unicode P*, or ASCII 33-47, 58-64, 91-96, 123-126) becomes its
     own word; text split on spaces.
  6. WordPiece: greedy longest-match-first with `##` continuation pieces; a word of more than
     `max_chars_per_word` characters (Google: 200; Hugging Face: 100), or one that cannot be
     covered, becomes a single `[UNK]`.
Typed text such as "[SEP]" is ordinary text ("[", "sep", "]"); special tokens are only ever added
by `BertPreprocessor`. Character properties come from the running Python's `unicodedata`, as in
Google's code (see `kbert.text.unicode_tables`); the one known difference, two rare spacing
combining marks typed out of canonical order, is described in `kbert.text.basic_tokenizer`.

Offsets (`tokenize_with_offsets`) point into the caller's original strings, in bytes (the unit
of TF strings) or in characters (code points; what Python's `str` indexes, e.g. SQuAD's
`answer_start`). A token spans from its first contributing character to just before the next
character that survives normalization, so accents and invisible characters the normalizer
deleted after a word belong to that word.
"""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from kbert import presets
from kbert.text.basic_tokenizer import BasicTokenizer
from kbert.text.tokenizer_files import (LEGACY_MAX_CHARS_PER_WORD, MAX_CHARS_PER_WORD,
                                        SPECIAL_TOKENS, check_max_chars)
# Still importable from here, where they lived before (kbert.presets, kbert.data, tests).
from kbert.text.tokenizer_files import (casing_from_checkpoint, load_vocabulary,  # noqa: F401
                                        max_chars_from_checkpoint)

_SUFFIX = "##"
_LONG_WORD = " "  # words never hold spaces and vocab tokens never start with one: always [UNK]


def take_tf_inputs(layer):
    """Lets a layer of TensorFlow graph ops receive its inputs as they are. Keras'
    `Layer.__call__` first converts them to the backend's tensors, which on the JAX backend
    fails for tf.string tensors in tf.data ("string arrays can only be made from NumPy
    arrays", Keras 3.15, JAX 0.10). Keras' own tf.data-ready layers (`CategoryEncoding`)
    switch the conversion off the same way."""
    layer._convert_input_args = False
    layer._allow_non_tensor_positional_args = True


@keras.saving.register_keras_serializable(package="kbert")
class BertTokenizer(keras.layers.Layer):
    """Strings [batch] → tf.RaggedTensor of int32 WordPiece ids [batch, None], no special tokens.

    Args:
      vocabulary: path to a vocab.txt (or a directory holding one) or a list of tokens; the
        line number / list index is the id. Must contain [PAD], [UNK], [CLS], [SEP], [MASK].
      lowercase: True for uncased checkpoints (lowercase, NFD, strip accents).
      strip_accents: None strips accents exactly where text is lowercased (Google's BERT);
        True or False decides apart from casing, as Hugging Face's `strip_accents` does (some
        uncased checkpoints keep accents). `from_pretrained` reads a checkpoint's own.
      max_chars_per_word: longer words (in characters, after normalization) become one [UNK].
        Google's 200 by default; `from_pretrained` reads a checkpoint's own (Hugging Face: 100),
        and a config saved before this argument existed means the 100 kbert used then.
    """

    def __init__(self, vocabulary, lowercase=True, max_chars_per_word=MAX_CHARS_PER_WORD,
                 strip_accents=None, **kwargs):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        take_tf_inputs(self)
        self.max_chars_per_word = check_max_chars(max_chars_per_word)
        self._vocab = load_vocabulary(vocabulary)
        self.lowercase = bool(lowercase)
        self.strip_accents = self.lowercase if strip_accents is None else bool(strip_accents)
        self._index = {t: i for i, t in enumerate(self._vocab)}
        for name, token in SPECIAL_TOKENS.items():
            setattr(self, f"{name}_token_id", self._index[token])

        self._basic = BasicTokenizer(self.lowercase, self.strip_accents)
        # Longer words are replaced before WordPiece, so a word has at most 4 bytes per character.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self._vocab, suffix_indicator=_SUFFIX,
            max_bytes_per_word=4 * self.max_chars_per_word, token_out_type=tf.int32,
            unknown_token=SPECIAL_TOKENS["unk"], no_pretokenization=True,
            support_detokenization=False)
        self._vocab_tensor = tf.constant(self._vocab)

    @classmethod
    def from_pretrained(cls, path, lowercase=None, max_chars_per_word=None, **kwargs):
        """Reads `vocab.txt` from a checkpoint directory or a name of `kbert.presets`; casing
        per `casing_from_checkpoint`, accents per `accents_from_checkpoint` and the word limit
        per `max_chars_from_checkpoint` unless given."""
        return presets.load_tokenizer(path, cls=cls, lowercase=lowercase,
                                      max_chars_per_word=max_chars_per_word, **kwargs)

    # --- vocabulary -------------------------------------------------------------------------

    def vocabulary_size(self):
        return len(self._vocab)

    def get_vocabulary(self):
        return list(self._vocab)

    def id_to_token(self, id):
        if not 0 <= int(id) < len(self._vocab):
            raise ValueError(f"Token id {id} is outside the vocabulary [0, {len(self._vocab)}).")
        return self._vocab[int(id)]

    def token_to_id(self, token):
        if token not in self._index:
            raise ValueError(f"Token {token!r} is not in the vocabulary.")
        return self._index[token]

    # --- the graph --------------------------------------------------------------------------

    def _words(self, normalized):
        """Normalized strings [batch] → words [batch, None] with byte offsets in `normalized`."""
        words, begin, end = self._basic.split(normalized)
        too_long = (tf.strings.length(words.flat_values, unit="UTF8_CHAR")
                    > self.max_chars_per_word)
        words = words.with_flat_values(tf.where(too_long, _LONG_WORD, words.flat_values))
        return words, begin, end, too_long

    def _prepare(self, inputs):
        text = tf.convert_to_tensor(inputs)
        if text.dtype != tf.string:
            raise TypeError(f"BertTokenizer expects string inputs, got dtype {text.dtype.name}.")
        if text.shape.rank is None or text.shape.rank > 1:
            raise ValueError(f"BertTokenizer expects strings of shape [batch] or a scalar, "
                             f"got shape {text.shape}.")
        scalar = text.shape.rank == 0
        return (tf.expand_dims(text, 0) if scalar else text), scalar

    def call(self, inputs):
        ids = self.tokenize_words(inputs)
        return ids.merge_dims(-2, -1)

    def tokenize_words(self, inputs):
        """Ids grouped by word: ragged int32 [batch, (words), (pieces)] ([(words), (pieces)]
        for a scalar), the form of tensorflow_text's BertTokenizer and TF Hub's BERT
        preprocessors' `tokenize`."""
        text, scalar = self._prepare(inputs)
        normalized, _, _ = self._basic.normalize(text)
        words, _, _, _ = self._words(normalized)
        ids = self._wordpiece.tokenize(words)
        return ids[0] if scalar else ids

    def tokenize(self, inputs):
        """The same as calling the tokenizer (keras-hub's name)."""
        return self(inputs)

    def tokenize_with_offsets(self, inputs, unit="byte"):
        """(ids, starts, ends): ragged int32 [batch, None] each; [start, end) into the original
        strings, in bytes (`unit="byte"`) or characters (`unit="char"`, code points, with each
        invalid UTF-8 sequence counting as one character)."""
        if unit not in ("byte", "char"):
            raise ValueError(f"unit must be 'byte' or 'char', got {unit!r}.")
        text, scalar = self._prepare(inputs)
        normalized, norm_chars, char_starts = self._basic.normalize(text)
        words, w_begin, w_end, too_long = self._words(normalized)
        pieces, p_begin, p_end = self._wordpiece.tokenize_with_offsets(words)
        # A word replaced by the long-word placeholder: its one [UNK] spans the whole word.
        i64 = lambda t: tf.cast(t, tf.int64)
        word_bytes = i64(w_end.flat_values - w_begin.flat_values)
        piece_word = pieces.values.value_rowids()  # flat word index of every piece
        p_end_flat = tf.where(tf.gather(too_long, piece_word),
                              tf.gather(word_bytes, piece_word), i64(p_end.flat_values))
        # Piece positions as global byte positions in the normalized batch (rows back to back).
        norm_len = i64(tf.strings.length(norm_chars.flat_values))  # bytes each character became
        char_norm_start = tf.cumsum(norm_len, exclusive=True)
        row_norm_start = tf.gather(tf.concat([char_norm_start, [tf.reduce_sum(norm_len)]], 0),
                                   norm_chars.row_splits[:-1])
        piece_row = tf.gather(words.value_rowids(), piece_word)
        base = tf.gather(row_norm_start, piece_row) + tf.gather(i64(w_begin.flat_values),
                                                                piece_word)
        g_begin = base + i64(p_begin.flat_values)
        g_end = base + p_end_flat
        # Start: the character whose normalized bytes hold g_begin.
        first = tf.searchsorted(char_norm_start, g_begin, side="right", out_type=tf.int64) - 1
        # End: the first character at or after g_end that survived normalization; characters
        # deleted in between (accents, invisible characters) stay with the token.
        key = 2 * char_norm_start - i64(tf.equal(norm_len, 0))
        after = tf.searchsorted(key, 2 * g_end, side="left", out_type=tf.int64)
        row_first_char = tf.gather(norm_chars.row_splits, piece_row)
        row_end_char = tf.gather(norm_chars.row_splits[1:], piece_row)
        if unit == "char":
            starts = first - row_first_char
            ends = tf.minimum(after, row_end_char) - row_first_char
        else:
            flat_starts = i64(char_starts.flat_values)
            starts = tf.gather(flat_starts, first)
            padded = tf.concat([flat_starts, [0]], 0)  # `after` may be one past the last char
            next_start = tf.gather(padded, tf.minimum(after, tf.size(flat_starts, tf.int64)))
            ends = tf.where(after < row_end_char, next_start,
                            tf.gather(i64(tf.strings.length(text)), piece_row))
        ids = pieces.merge_dims(1, 2)
        starts = ids.with_flat_values(tf.cast(starts, tf.int32))
        ends = ids.with_flat_values(tf.cast(ends, tf.int32))
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def detokenize(self, ids):
        """Ids [batch, None] (ragged or dense; [PAD] dropped) → strings [batch].

        WordPiece continuations are glued back on; the text is the normalized one (lowercased
        and accent-free for uncased vocabularies), words separated by single spaces.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
            if ids.shape.rank == 1:
                return self.detokenize(ids[tf.newaxis])[0]
            ids = tf.RaggedTensor.from_tensor(ids)
            ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, self.pad_token_id))
        elif ids.shape.rank == 1:
            return self.detokenize(ids[tf.newaxis])[0]
        tokens = tf.gather(self._vocab_tensor, ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " ##", "")

    def compute_output_spec(self, inputs):
        shape = tuple(inputs.shape) + (None,)
        return keras.KerasTensor(shape, dtype="int32", ragged=True)

    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary": list(self._vocab), "lowercase": self.lowercase,
                       "strip_accents": self.strip_accents,
                       "max_chars_per_word": self.max_chars_per_word})
        return config

    @classmethod
    def from_config(cls, config):
        """A config without `max_chars_per_word` was saved by a kbert that cut words at 100
        characters: keep that, so a saved model reads text as it was trained to."""
        config = dict(config)
        config.setdefault("max_chars_per_word", LEGACY_MAX_CHARS_PER_WORD)
        return super().from_config(config)
