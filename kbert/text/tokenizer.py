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

from kbert import presets
from kbert.text.basic_tokenizer import BasicTokenizer
from kbert.text.tf_libs import require_tensorflow, tf, tf_text
from kbert.text.tokenizer_files import (LEGACY_MAX_CHARS_PER_WORD, MAX_CHARS_PER_WORD,
                                        SPECIAL_TOKENS, check_max_chars, load_vocabulary)

_SUFFIX = "##"
_LONG_WORD = " "  # words never hold spaces and vocab tokens never start with one: always [UNK]


def take_tf_inputs(layer):
    """Lets a layer of TensorFlow graph ops receive its inputs as they are.

    Keras' `Layer.__call__` converts inputs to the backend's tensors, which fails for tf.string
    tensors in tf.data on the JAX backend ("string arrays can only be made from NumPy arrays").
    Keras' own tf.data-ready layers (`CategoryEncoding`) switch the conversion off the same way.

    Args:
      layer: the `keras.layers.Layer` to change, in its constructor after `super().__init__`.
    """
    layer._convert_input_args = False
    layer._allow_non_tensor_positional_args = True


@keras.saving.register_keras_serializable(package="kbert")
class BertTokenizer(keras.layers.Layer):
    """BERT's WordPiece tokenizer as a Keras layer: strings to ragged int32 token ids.

    Google's `FullTokenizer` in TensorFlow graph ops (see the module docstring for the steps),
    so it runs in tf.data, inside a model and in an exported SavedModel alike. It adds no
    special tokens: [CLS], [SEP] and padding are the preprocessors' work (`BertPreprocessor`),
    and text such as "[SEP]" typed by a user is tokenized as ordinary text.

    Args:
      vocabulary: path to a vocab.txt (or a directory holding one) or a list of tokens; the
        line number / list index is the id. Must contain [PAD], [UNK], [CLS], [SEP], [MASK].
      lowercase: True for uncased checkpoints (lowercase, NFD, strip accents).
      max_chars_per_word: longer words (in characters, after normalization) become one [UNK].
        Google's 200 by default; `from_pretrained` reads a checkpoint's own (Hugging Face: 100),
        and a saved config without it means 100 (`from_config`).
      strip_accents: None strips accents exactly where text is lowercased (Google's BERT);
        True or False decides apart from casing, as Hugging Face's `strip_accents` does (some
        uncased checkpoints keep accents). `from_pretrained` reads a checkpoint's own.
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Call arguments:
      inputs: strings, a tf.string tensor [batch] or a scalar (or a list of Python strings).

    Returns:
      A `tf.RaggedTensor` of int32 ids [batch, (tokens)], or an int32 tensor [tokens] for a
      scalar string.

    The ids of the special tokens are attributes: `pad_token_id`, `unk_token_id`,
    `cls_token_id`, `sep_token_id`, `mask_token_id`.

    Examples:
        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> tokenizer(["The quick brown fox.", "Unaffable!"]).to_list()
        [[1996, 4248, 2829, 4419, 1012], [14477, 20961, 3468, 999]]
        >>> ids = tokenizer("Unaffable résumé!").numpy().tolist()
        >>> [tokenizer.id_to_token(i) for i in ids]
        ['una', '##ffa', '##ble', 'resume', '!']
        >>> tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
        (101, 102, 103)

    A vocabulary can also be a list of tokens:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "fox", "##es"]
    >>> kbert.BertTokenizer(vocabulary)(["The foxes", "the cats"]).to_list()
    [[5, 6, 7], [5, 1]]
    """

    def __init__(self, vocabulary, lowercase=True, max_chars_per_word=MAX_CHARS_PER_WORD,
                 strip_accents=None, **kwargs):
        require_tensorflow(type(self).__name__)
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
        """The tokenizer of a checkpoint directory or of a `kbert.presets` name.

        Reads the checkpoint's `vocab.txt`, and unless given its casing, accent stripping and
        word limit (`kbert.text.tokenizer_files`).

        Args:
          path: a checkpoint directory (Hugging Face, Google, keras-hub, kbert) or a preset
            name such as "minilm_l6_h384_uncased".
          lowercase: None to read the casing from the checkpoint, else as in the constructor.
          max_chars_per_word: None to read it from the checkpoint, else as in the constructor.
          **kwargs: other constructor arguments (e.g. `strip_accents`).

        Returns:
          A `BertTokenizer`.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> tokenizer.lowercase, tokenizer.max_chars_per_word
            (True, 100)
        """
        return presets.load_tokenizer(path, cls=cls, lowercase=lowercase,
                                      max_chars_per_word=max_chars_per_word, **kwargs)

    # --- vocabulary -------------------------------------------------------------------------

    def vocabulary_size(self):
        """The number of tokens in the vocabulary.

        Examples:
            >>> import kbert
            >>> kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased").vocabulary_size()
            30522
        """
        return len(self._vocab)

    def get_vocabulary(self):
        """The vocabulary as a new list of tokens, each at the index of its id.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> tokenizer.get_vocabulary()[100:104]
            ['[UNK]', '[CLS]', '[SEP]', '[MASK]']
        """
        return list(self._vocab)

    def id_to_token(self, id):
        """The token of id `id`; a ValueError outside the vocabulary.

        Examples:
            >>> import kbert
            >>> kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased").id_to_token(4419)
            'fox'
        """
        if not 0 <= int(id) < len(self._vocab):
            raise ValueError(f"Token id {id} is outside the vocabulary [0, {len(self._vocab)}).")
        return self._vocab[int(id)]

    def token_to_id(self, token):
        """The id of `token`; a ValueError if the vocabulary does not hold it.

        Examples:
            >>> import kbert
            >>> kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased").token_to_id("##ble")
            3468
        """
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
        """Strings [batch] → ragged int32 ids [batch, (tokens)]; see the class docstring."""
        ids = self.tokenize_words(inputs)
        return ids.merge_dims(-2, -1)

    def tokenize_words(self, inputs):
        """The ids of `inputs` grouped by word.

        The form of tensorflow_text's `BertTokenizer` and TF Hub's BERT preprocessors'
        `tokenize`.

        Args:
          inputs: strings [batch], or a scalar string.

        Returns:
          A ragged int32 tensor [batch, (words), (pieces)] ([(words), (pieces)] for a scalar).

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> tokenizer.tokenize_words(["Unaffable fox"]).to_list()
            [[[14477, 20961, 3468], [4419]]]
        """
        text, scalar = self._prepare(inputs)
        normalized, _, _ = self._basic.normalize(text)
        words, _, _, _ = self._words(normalized)
        ids = self._wordpiece.tokenize(words)
        return ids[0] if scalar else ids

    def tokenize(self, inputs):
        """The same as calling the tokenizer (keras-hub's name).

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> tokenizer.tokenize(["The quick brown fox."]).to_list()
            [[1996, 4248, 2829, 4419, 1012]]
        """
        return self(inputs)

    def tokenize_with_offsets(self, inputs, unit="byte"):
        """The ids of `inputs` and where each token's text is in the original strings.

        A token spans from its first character to just before the next character that
        survives normalization, so accents and invisible characters deleted after a word
        belong to that word.

        Args:
          inputs: strings [batch], or a scalar string.
          unit: "byte" for offsets in bytes (the unit of TF strings) or "char" for code points
            (what Python's `str` indexes), each invalid UTF-8 sequence counting as one.

        Returns:
          A tuple `(ids, starts, ends)` of ragged int32 tensors [batch, (tokens)] ([tokens]
          for a scalar): each token's [start, end) in its original string.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> ids, starts, ends = tokenizer.tokenize_with_offsets(["Héllo wörld!"], unit="char")
            >>> ids.to_list(), starts.to_list(), ends.to_list()
            ([[7592, 2088, 999]], [[0, 6, 11]], [[5, 11, 12]])
            >>> _, starts, ends = tokenizer.tokenize_with_offsets(["Héllo wörld!"])  # bytes
            >>> starts.to_list(), ends.to_list()
            ([[0, 7, 13]], [[6, 13, 14]])
        """
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
        """Ids back to text: WordPiece continuations glued on, words joined by single spaces.

        The text is the normalized one (lowercased and accent-free for uncased vocabularies).

        Args:
          ids: int ids [batch, None], ragged or dense ([PAD] ids of a dense tensor are
            dropped), or one row [None].

        Returns:
          A tf.string tensor [batch], or a scalar for one row.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> tokenizer.detokenize(tokenizer(["Unaffable Résumé!"])).numpy().tolist()
            [b'unaffable resume !']
            >>> tokenizer.detokenize([[101, 4419, 102, 0, 0]]).numpy().tolist()
            [b'[CLS] fox [SEP]']
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
        """A ragged int32 `keras.KerasTensor` of `inputs`'s shape plus a tokens axis."""
        shape = tuple(inputs.shape) + (None,)
        return keras.KerasTensor(shape, dtype="int32", ragged=True)

    def get_config(self):
        """The layer's config, with the vocabulary as a list and the tokenization settings."""
        config = super().get_config()
        config.update({"vocabulary": list(self._vocab), "lowercase": self.lowercase,
                       "strip_accents": self.strip_accents,
                       "max_chars_per_word": self.max_chars_per_word})
        return config

    @classmethod
    def from_config(cls, config):
        """The tokenizer of a `get_config` dict.

        A config without `max_chars_per_word` gets `LEGACY_MAX_CHARS_PER_WORD` (100), the limit
        such configs were saved with, so a saved model reads text as it was trained to.
        """
        config = dict(config)
        config.setdefault("max_chars_per_word", LEGACY_MAX_CHARS_PER_WORD)
        return super().from_config(config)
