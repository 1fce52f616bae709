"""`PreprocessorBase`: what every kbert preprocessor layer shares.

A preprocessor holds a `BertTokenizer`, has no weights and outputs integers; its config carries
the tokenizer (vocabulary and casing), so a task model saved with it packs text the same way
after loading.

It also bounds the work one input costs (`text_budget`, `cap_text`): a string would otherwise
be tokenized whole before truncation, however long. Each string is cut, before tokenization, to
the bytes its kept tokens can come from. Why the bound holds: normalization and word splitting
look at one character at a time (the final-sigma rule one more), so the first k words of a
prefix of the text are the first k words of the text as long as the prefix holds at least k + 1
words; n kept tokens come from at most n words (each word gives one token at least); and a word
of at most `max_chars_per_word` characters, with one separating character, takes at most
(max_chars_per_word + 1) * 4 bytes of UTF-8. So the cut changes nothing when the first n + 1
words, and what precedes them, fit in (n + 1) * (max_chars_per_word + 1) * 4 bytes: true unless
the text's first tokens come after longer runs of characters that give no token (spaces, control
characters, stripped accents) or after words longer than `max_chars_per_word` (one [UNK] each):
those then lose tokens to the cut.
"""

import weakref

import keras

from kbert.text.tf_libs import tf
from kbert.text.tokenizer import BertTokenizer, take_tf_inputs

_UTF8_MAX_BYTES = 4  # the longest UTF-8 encoding of one character


def text_budget(tokenizer, tokens):
    """The bytes of text enough for the first `tokens` sub-tokens (see the module docstring).

    Args:
      tokenizer: the `BertTokenizer` (its `max_chars_per_word` bounds a word's bytes).
      tokens: how many sub-tokens to keep.

    Returns:
      An int: (tokens + 1) * (max_chars_per_word + 1) * 4.

    Examples:
        >>> import kbert
        >>> from kbert.text.preprocessor_base import text_budget
        >>> tokenizer = kbert.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        ...                                 max_chars_per_word=100)
        >>> text_budget(tokenizer, 126)
        51308
    """
    return (int(tokens) + 1) * (int(tokenizer.max_chars_per_word) + 1) * _UTF8_MAX_BYTES


def cap_text(text, max_bytes):
    """Each string cut to at most `max_bytes` bytes, at a UTF-8 character boundary.

    The cut keeps whole characters, so valid text stays valid, and the result is a prefix of
    the original, so offsets into it are offsets into the original.

    Args:
      text: strings of any shape.
      max_bytes: the most bytes to keep, at least 4.

    Returns:
      A tf.string tensor of `text`'s shape.

    Examples:
        >>> from kbert.text.preprocessor_base import cap_text
        >>> capped = cap_text(["abcdef", "ééé", "ab"], 5)  # é is two bytes
        >>> [t.decode() for t in capped.numpy().tolist()]
        ['abcde', 'éé', 'ab']
    """
    text = tf.convert_to_tensor(text, tf.string)
    max_bytes = int(max_bytes)
    if max_bytes < _UTF8_MAX_BYTES:
        raise ValueError(f"max_bytes must be at least {_UTF8_MAX_BYTES}, got {max_bytes}.")
    length = tf.strings.length(text)
    # The bytes at max_bytes - 3 ... max_bytes: the cut goes before the last one that starts a
    # character (not a continuation byte 10xxxxxx); one exists in valid UTF-8.
    first = max_bytes - _UTF8_MAX_BYTES + 1
    tail = tf.strings.substr(text, tf.minimum(first, length),
                            tf.fill(tf.shape(length), _UTF8_MAX_BYTES))
    tail = tf.io.decode_raw(tail, tf.uint8, fixed_length=_UTF8_MAX_BYTES)
    starts = tf.not_equal(tf.bitwise.bitwise_and(tail, 0xC0), 0x80)
    last = tf.reduce_max(tf.where(starts, tf.range(_UTF8_MAX_BYTES), -1), axis=-1)
    cut = tf.where(last >= 0, first + last, max_bytes)  # none: invalid text, cut anywhere
    return tf.strings.substr(text, tf.zeros_like(length),
                            tf.where(length > max_bytes, cut, length))


def string_batch(x, owner, what="text"):
    """`x` as a tf.string tensor [batch].

    Args:
      x: a string, a list of strings, or a tensor [batch] or [batch, 1] (as
        `keras.Input(shape=(1,))` gives).
      owner: the name errors give for the caller, such as "BertSpanPreprocessor".
      what: what errors call `x`.

    Returns:
      A tf.string tensor [batch]. Raises a TypeError naming `owner` for other dtypes, a
      ValueError for other shapes.

    Examples:
        >>> from kbert.text.preprocessor_base import string_batch
        >>> string_batch("one text", "me").numpy().tolist()
        [b'one text']
    """
    x = tf.convert_to_tensor(x)
    if x.dtype != tf.string:
        raise TypeError(f"{owner} expects {what} as strings, got dtype {x.dtype.name}.")
    if x.shape.rank == 2 and x.shape[-1] == 1:
        x = tf.squeeze(x, -1)
    if x.shape.rank == 0:
        x = x[tf.newaxis]
    if x.shape.rank != 1:
        raise ValueError(f"{owner} expects {what} of shape [batch], got {x.shape}.")
    return x


_TRACED = weakref.WeakKeyDictionary()
"""{preprocessor: (its config, its `traced` function)}, kept off the layer: a `tf.function`
attribute of a layer would be saved with any SavedModel that holds the layer."""


def example_weights(sample_weight, examples, what):
    """`sample_weight` as float32 [examples], asserted to hold one weight per `what`.

    What the tagger and span preprocessors spread over the tokens or windows of each example.

    Args:
      sample_weight: one weight per example, any shape.
      examples: the number of examples.
      what: an example's name in the error message ("sentence", "question").

    Returns:
      A float32 tensor [examples].
    """
    sample_weight = tf.reshape(tf.cast(sample_weight, tf.float32), [-1])
    check = tf.debugging.assert_equal(tf.size(sample_weight), tf.cast(examples, tf.int32),
                                      message=f"sample_weight needs one weight per {what}")
    with tf.control_dependencies([check]):
        return tf.identity(sample_weight)


def traced(preprocessor):
    """`preprocessor` as one `tf.function`, traced once per kind of input.

    A tf.data map that packs with it (train, dev, test, predict) calls that graph instead of
    building the tokenizer and packing graphs again. A preprocessor whose settings or tokenizer
    changed since gets a new function. The inputs reach it as one tuple: with
    `reduce_retracing`, calls with different numbers of arguments crash TensorFlow's retracing
    ("IndexError: list index out of range" in `most_specific_common_subtype`).

    Args:
      preprocessor: a kbert preprocessor layer.

    Returns:
      A function that takes the preprocessor's call arguments and returns its outputs.
    """
    config = {k: v for k, v in preprocessor.get_config().items() if k != "tokenizer"}
    config["tokenizer"] = id(preprocessor.tokenizer)  # its config changes once it is built
    config_then, function = _TRACED.get(preprocessor, (None, None))
    if function is None or config_then != config:
        layer = weakref.ref(preprocessor)  # the function must not keep its key alive
        function = tf.function(lambda inputs: layer()(*inputs), reduce_retracing=True,
                               autograph=False)
        _TRACED[preprocessor] = (config, function)
    return lambda *inputs: function(tf.nest.map_structure(_one_column_as_batch, inputs))


def _one_column_as_batch(x):
    """Strings [batch, 1] as [batch] before they reach the traced function: with both ranks
    seen, `reduce_retracing` would relax the signature to an unknown rank, which the tokenizer
    refuses."""
    if (isinstance(x, tf.Tensor) and x.dtype == tf.string and x.shape.rank == 2
            and x.shape[-1] == 1):
        return tf.squeeze(x, -1)
    return x


class PreprocessorBase(keras.layers.Layer):
    """The base layer of kbert's preprocessors: a `BertTokenizer`, no weights, int outputs.

    Base of `BertPreprocessor`, `BertMaskedLMPreprocessor`, `BertFillMaskPreprocessor`,
    `BertSpanPreprocessor` and `BertTokenPreprocessor`. The config carries the tokenizer
    (vocabulary and casing), so a model saved with a preprocessor packs text the same way after
    loading; subclasses add their own settings to `get_config` and define `call`.

    Args:
      tokenizer: a `BertTokenizer`, or its serialized config (a dict).
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Examples:
        >>> import kbert
        >>> from kbert.text.preprocessor_base import PreprocessorBase
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=16)
        >>> isinstance(preprocessor, PreprocessorBase), preprocessor.tokenizer is tokenizer
        (True, True)
        >>> copy = kbert.BertPreprocessor.from_config(preprocessor.get_config())
        >>> copy.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
        True
        >>> long_text = "a long text " * 10_000
        >>> len(preprocessor.cap([long_text], tokens=14).numpy()[0])  # (14 + 1) * (100 + 1) * 4
        6060
    """

    def __init__(self, tokenizer, **kwargs):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        take_tf_inputs(self)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise TypeError(f"{type(self).__name__} needs a BertTokenizer, got "
                            f"{type(tokenizer)}.")
        self.tokenizer = tokenizer

    def cap(self, text, tokens):
        """`text` cut to what its first `tokens` sub-tokens can come from.

        `cap_text` with the `text_budget` of this preprocessor's tokenizer.

        Args:
          text: strings of any shape.
          tokens: how many sub-tokens the caller keeps.

        Returns:
          A tf.string tensor of `text`'s shape, each string a prefix of the original.
        """
        return cap_text(text, text_budget(self.tokenizer, tokens))

    def get_config(self):
        """The layer's config, with the tokenizer serialized."""
        return {**super().get_config(),
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer)}

    @classmethod
    def from_config(cls, config):
        """The preprocessor of a `get_config` dict, its tokenizer deserialized."""
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)
