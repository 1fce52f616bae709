"""BertFillMaskPreprocessor: text with blanks → the inputs a masked LM fills them from.

What Hugging Face's fill-mask pipeline feeds its model, in the graph: each `marker` (default
"[MASK]") in a string is a blank. The text between markers is tokenized as text, so "[SEP]" or
"[CLS]" typed there stays text, and each blank becomes the vocabulary's [MASK] id. Packing is
`[CLS] text [SEP]`, cut to `sequence_length` like `BertPreprocessor`; a blank the cut would
drop is refused (an InvalidArgumentError that says so), never silently left unfilled.
"""

import keras

from kbert.config_checks import whole_number
from kbert.text.preprocessor import pack_segments, truncated_lengths
from kbert.text.preprocessor_base import PreprocessorBase, cap_text, string_batch, text_budget
from kbert.text.tf_libs import tf


def blank_positions(token_ids, mask_token_id):
    """Where the [MASK] ids of `token_ids` are.

    Args:
      token_ids: int ids [batch, sequence_length].
      mask_token_id: the id of [MASK].

    Returns:
      int32 [batch, most blanks of a row]: each row's positions in order, padded with 0 (the
      [CLS] position, never a blank).

    Examples:
        >>> from kbert.text.fill_mask_preprocessor import blank_positions
        >>> blank_positions([[101, 103, 7, 103, 102], [101, 5, 103, 102, 0]], 103).numpy().tolist()
        [[1, 3], [2, 0]]
    """
    is_blank = tf.equal(token_ids, mask_token_id)
    positions = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(tf.shape(is_blank)[1]), tf.shape(is_blank)), is_blank)
    return positions.to_tensor(0)


@keras.saving.register_keras_serializable(package="kbert")
class BertFillMaskPreprocessor(PreprocessorBase):
    """Packs text with blanks into the inputs a masked LM (`BertPretrainer`) fills them from.

    Each `marker` in a string is a blank and becomes the vocabulary's [MASK] id; the text
    between markers is tokenized as text (a typed "[SEP]" stays text). Packing is
    `[CLS] text [SEP]`, cut to `sequence_length`; a blank the cut would drop is refused (an
    InvalidArgumentError), never silently left unfilled. `kbert.fill_mask` uses it.

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length: the packed length, [CLS] and [SEP] included.
      marker: the string that marks a blank.
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Call arguments:
      texts: strings [batch], or one string.

    Returns:
      A dict: `token_ids`, `segment_ids`, `padding_mask`, int32 [batch, sequence_length], and
      `masked_positions`, int32 [batch, most blanks of a string]: where each string's blanks
      are, in order, padded with 0 (the [CLS] position, never a blank). No batch axis for one
      string.

    Examples:
        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertFillMaskPreprocessor(tokenizer, sequence_length=10)
        >>> out = preprocessor(["Paris is the [MASK] of [MASK].", "A [MASK] day."])
        >>> ids = out["token_ids"].numpy().tolist()
        >>> ids[0]
        [101, 3000, 2003, 1996, 103, 1997, 103, 1012, 102, 0]
        >>> ids[1]
        [101, 1037, 103, 2154, 1012, 102, 0, 0, 0, 0]
        >>> out["masked_positions"].numpy().tolist()
        [[4, 6], [2, 0]]
    """

    def __init__(self, tokenizer, sequence_length=128, marker="[MASK]", **kwargs):
        super().__init__(tokenizer, **kwargs)
        sequence_length = whole_number("sequence_length", sequence_length, 3,
                                       "an integer of at least 3 ([CLS], a blank, [SEP])")
        if not isinstance(marker, str) or not marker.strip():
            raise ValueError(f"marker must be a non-blank string, got {marker!r}.")
        self.sequence_length = sequence_length
        self.marker = marker

    def call(self, texts):
        """Packs `texts` and finds their blanks; see the class docstring."""
        texts = tf.convert_to_tensor(texts)
        scalar = texts.shape.rank == 0
        texts = string_batch(texts, type(self).__name__)
        budget = self.sequence_length - 2
        blanks = tf.strings.split(texts, sep=self.marker).row_lengths() - 1
        # A blank is one token from len(marker) bytes: the cap keeps what the first `budget`
        # tokens can come from (PreprocessorBase.cap), blanks included.
        kept_text = cap_text(texts, text_budget(self.tokenizer, budget)
                             + budget * len(self.marker.encode()))
        pieces = tf.strings.split(kept_text, sep=self.marker)  # [batch, (blanks + 1)]
        ids = self.tokenizer(pieces.flat_values)  # [pieces, (tokens)]
        # A [MASK] after every piece, then the one after each string's last piece dropped.
        mask = tf.fill([ids.nrows(), 1], tf.constant(self.tokenizer.mask_token_id, ids.dtype))
        ids = tf.concat([ids, tf.RaggedTensor.from_tensor(mask)], axis=1)
        ids = tf.RaggedTensor.from_row_lengths(ids, pieces.row_lengths()).merge_dims(1, 2)
        ids = ids[:, :-1]
        keep = truncated_lengths([ids.row_lengths()], budget)
        tokenizer = self.tokenizer
        out = pack_segments([(ids,)], keep, self.sequence_length, tokenizer.cls_token_id,
                            tokenizer.sep_token_id, tokenizer.pad_token_id)
        positions = blank_positions(out["token_ids"], tokenizer.mask_token_id)
        check = tf.debugging.assert_equal(
            tf.reduce_sum(tf.cast(positions > 0, blanks.dtype), axis=1), blanks, message=(
                f"A blank ({self.marker}) falls after the first {budget} tokens, which is all "
                f"the model reads at sequence_length {self.sequence_length}: put it earlier "
                "or shorten the text"))
        with tf.control_dependencies([check]):
            out["masked_positions"] = tf.identity(positions)
        if scalar:
            out = {k: v[0] for k, v in out.items()}
        return out

    def compute_output_spec(self, texts):
        """The `keras.KerasTensor`s `call` returns for symbolic `texts`."""
        batch = tuple(texts.shape[:1])
        out = {k: keras.KerasTensor(batch + (self.sequence_length,), dtype="int32")
               for k in ("token_ids", "segment_ids", "padding_mask")}
        out["masked_positions"] = keras.KerasTensor(batch + (None,), dtype="int32")
        return out

    def get_config(self):
        """The layer's config: the tokenizer, `sequence_length` and `marker`."""
        return {**super().get_config(), "sequence_length": self.sequence_length,
                "marker": self.marker}
