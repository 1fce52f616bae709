"""The left-to-right language-model objective of the paper's "LTR & No NSP" ablation (section
5.1, Table 5) as a drop-in for `MaskedLM` in the pre-training pipeline.

Nothing is corrupted: position i predicts token i + 1 from tokens 0..i (the backbone must be
`causal=True`, else the target is in view). Targets are every real next token that is not
`[CLS]`, `[SEP]`, `[PAD]` or `[MASK]`, the same token classes `MaskedLM` predicts, so held-out
accuracies of the two objectives count the same kind of token. The predictions reach
`BertPretrainer`'s `mlm` head through the same `masked_positions` input: positions 0..length-2.
"""

from kbert.text.masking import to_fit_arguments
from kbert.text.tf_libs import tf


class NextTokenLM:
    """`lm(features, seed)` → (inputs, targets, sample_weights) for `BertPretrainer.fit`, with
    `features` the dict of int32 [batch, length] `token_ids`, `segment_ids`, `padding_mask`
    `MaskedLM` takes. `seed` is accepted for the pipeline's sake; nothing here is random."""

    def __init__(self, special_ids):
        self.special_ids = sorted({int(i) for i in special_ids})

    @classmethod
    def from_tokenizer(cls, tokenizer):
        return cls([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
                    tokenizer.mask_token_id])

    def targets(self, token_ids, padding_mask):
        """(positions, next ids, weights), each [batch, length - 1]."""
        token_ids = tf.cast(token_ids, tf.int32)
        following = token_ids[:, 1:]
        weights = tf.cast(padding_mask, tf.bool)[:, 1:]
        for special in self.special_ids:
            weights &= tf.not_equal(following, special)
        positions = tf.broadcast_to(tf.range(tf.shape(following)[1])[tf.newaxis, :],
                                    tf.shape(following))
        return positions, tf.where(weights, following, 0), tf.cast(weights, tf.float32)

    def __call__(self, features, seed=None):
        del seed
        positions, ids, weights = self.targets(features["token_ids"], features["padding_mask"])
        return to_fit_arguments(features, features["token_ids"], positions, ids, weights)
