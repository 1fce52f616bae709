"""BertFillMaskPreprocessor: text with blanks → the inputs a masked LM fills them from.

What Hugging Face's fill-mask pipeline feeds its model, in the graph: each `marker` (default
"[MASK]") in a string is a blank. The text between markers is tokenized as text, so "[SEP]" or
"[CLS]" typed there stays text, and each blank becomes the vocabulary's [MASK] id. Packing is
`[CLS] text [SEP]`, cut to `sequence_length` like `BertPreprocessor`; a blank the cut would
drop is refused (an InvalidArgumentError that says so), never silently left unfilled.
"""

import keras
import tensorflow as tf

from kbert.config_checks import whole_number
from kbert.text.preprocessor import pack_segments, truncated_lengths
from kbert.text.preprocessor_base import PreprocessorBase, cap_text, string_batch, text_budget


def blank_positions(token_ids, mask_token_id):
    """Where the [MASK] ids of `token_ids` [batch, seq] are: int32 [batch, most blanks of a
    row], each row in order and padded with 0 (the [CLS] position, never a blank)."""
    is_blank = tf.equal(token_ids, mask_token_id)
    positions = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(tf.shape(is_blank)[1]), tf.shape(is_blank)), is_blank)
    return positions.to_tensor(0)


@keras.saving.register_keras_serializable(package="kbert")
class BertFillMaskPreprocessor(PreprocessorBase):
    """Strings [batch] with blanks → {"token_ids", "segment_ids", "padding_mask"} int32
    [batch, sequence_length] and "masked_positions" int32 [batch, blanks]: where each string's
    blanks are, in order, padded with 0 (the [CLS] position, never a blank) to the most blanks
    of the batch. The four are the inputs of a `BertPretrainer`.

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length: the packed length, [CLS] and [SEP] included.
      marker: the string that marks a blank.
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
        texts = tf.convert_to_tensor(texts)
        scalar = texts.shape.rank == 0
        texts = string_batch(texts, "BertFillMaskPreprocessor")
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
        batch = tuple(texts.shape[:1])
        out = {k: keras.KerasTensor(batch + (self.sequence_length,), dtype="int32")
               for k in ("token_ids", "segment_ids", "padding_mask")}
        out["masked_positions"] = keras.KerasTensor(batch + (None,), dtype="int32")
        return out

    def get_config(self):
        return {**super().get_config(), "sequence_length": self.sequence_length,
                "marker": self.marker}
