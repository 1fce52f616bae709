"""BERT's masked-LM corruption as TensorFlow graph ops (`MaskedLM`), shared by the pre-training
data pipeline (`kbert.data.pretraining`) and the raw-text `BertMaskedLMPreprocessor`.

For each sequence (`MaskedLM.__call__` works on a batch [batch, length] at once):

* candidates are the real tokens that are not `[CLS]`, `[SEP]` or `[PAD]` (nor any other id in
  `special_ids`);
* `num_to_predict = min(max_predictions, max(1, round(mask_rate * candidates)))`;
* with `whole_word=True` a word is a token plus the `##` pieces that follow it, and words are
  chosen whole: words are visited in a random order and a word is taken when it still fits in
  `num_to_predict` (otherwise skipped, as in Google's code); without it every candidate token is
  its own word;
* each chosen token independently becomes `[MASK]` with probability 0.8, a uniformly random
  vocabulary id with probability 0.1, and stays unchanged with probability 0.1;
* the chosen positions (in increasing order) fill `masked_positions` [batch, max_predictions];
  unused slots hold position 0 with weight 0.

Randomness: with `seed` (an int32 pair, e.g. a per-batch counter next to a run seed) the ops are
stateless and a batch's masks are a pure function of (seed, batch); without it they draw from
TensorFlow's global generator.
"""

import math

from kbert.text.tf_libs import tf


def default_max_predictions(sequence_length, mask_rate=0.15):
    """20 at length 128 (the paper's setting), else ceil(mask_rate · length)."""
    return 20 if sequence_length == 128 else max(1, math.ceil(mask_rate * sequence_length))


class MaskedLM:
    """The masking step: `masker(features, seed)` → (inputs, targets, sample_weights) for
    `BertPretrainer.fit`.

    `features` is a dict of int32 [batch, length] `token_ids`, `segment_ids`, `padding_mask` and
    optionally `next_sentence_label` [batch]. Args: `vocabulary` (list of tokens; `##` marks
    continuation pieces), the special ids, `mask_rate`, `max_predictions`, `whole_word`,
    probabilities `mask_prob`/`random_prob` (the rest stays unchanged).
    """

    def __init__(self, vocabulary, mask_id, special_ids, mask_rate=0.15, max_predictions=20,
                 whole_word=False, mask_prob=0.8, random_prob=0.1):
        if not 0.0 < mask_rate <= 1.0:
            raise ValueError(f"mask_rate must be in (0, 1], got {mask_rate}.")
        if max_predictions < 1:
            raise ValueError(f"max_predictions must be positive, got {max_predictions}.")
        if mask_prob < 0 or random_prob < 0 or mask_prob + random_prob > 1:
            raise ValueError("mask_prob and random_prob must be >= 0 and sum to at most 1.")
        self.vocabulary_size = len(vocabulary)
        self.mask_id = int(mask_id)
        self.special_ids = sorted({int(i) for i in special_ids})
        self.mask_rate = float(mask_rate)
        self.max_predictions = int(max_predictions)
        self.whole_word = bool(whole_word)
        self.mask_prob = float(mask_prob)
        self.random_prob = float(random_prob)
        self._continuation = tf.constant([t.startswith("##") for t in vocabulary])

    @classmethod
    def from_tokenizer(cls, tokenizer, **kwargs):
        """Uses a `BertTokenizer`'s vocabulary and special-token ids."""
        specials = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
                    tokenizer.mask_token_id]
        return cls(tokenizer.get_vocabulary(), tokenizer.mask_token_id, specials, **kwargs)

    # --- the graph ------------------------------------------------------------------------

    def choose(self, token_ids, padding_mask, seed=None):
        """Which positions to predict: bool [batch, length]."""
        shape = tf.shape(token_ids)
        batch, length = shape[0], shape[1]
        candidate = tf.cast(padding_mask, tf.bool)
        for special in self.special_ids:
            candidate &= tf.not_equal(token_ids, special)
        if self.whole_word:
            continuation = tf.gather(self._continuation, token_ids) & candidate
            previous = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])  # a piece after [SEP] starts
            start = candidate & ~(continuation & previous)        # a word
        else:
            start = candidate
        # Word index of every token (the last word start at or before it); words per row.
        word = tf.cumsum(tf.cast(start, tf.int32), axis=1) - 1
        word = tf.maximum(word, 0)
        n_candidates = tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1)
        budget = tf.cast(tf.round(self.mask_rate * tf.cast(n_candidates, tf.float32)), tf.int32)
        budget = tf.minimum(self.max_predictions, tf.maximum(1, budget))
        budget = tf.where(n_candidates > 0, budget, 0)
        # Word sizes [batch, length] (slot w of row b = size of word w).
        flat = word + tf.expand_dims(tf.range(batch) * length, 1)
        size = tf.math.unsorted_segment_sum(tf.cast(candidate, tf.int32), flat, batch * length)
        size = tf.reshape(size, shape)
        # A random visiting order of the words.
        priority = self._uniform(shape, seed, 0)
        priority = tf.where(size > 0, priority, 2.0)
        order = tf.argsort(priority, axis=1)
        sorted_size = tf.gather(size, order, batch_dims=1)
        if self.whole_word:
            taken_sorted = self._greedy(sorted_size, budget)
        else:  # all sizes are 1: the first `budget` words in the order
            taken_sorted = (tf.cumsum(sorted_size, axis=1) <= tf.expand_dims(budget, 1)) & (
                sorted_size > 0)
        inverse = tf.argsort(order, axis=1)
        taken_word = tf.gather(taken_sorted, inverse, batch_dims=1)
        return tf.gather(taken_word, word, batch_dims=1) & candidate

    @staticmethod
    def _greedy(sorted_size, budget):
        """Visits words in order and takes one when it still fits in the budget."""
        def step(count, size):
            fits = (count + size <= budget) & (size > 0)
            return tf.where(fits, count + size, count), fits

        _, taken = tf.scan(lambda acc, size: step(acc[0], size),
                           tf.transpose(sorted_size),
                           initializer=(tf.zeros_like(budget), tf.zeros_like(budget, tf.bool)))
        return tf.transpose(taken)

    def _uniform(self, shape, seed, salt):
        if seed is None:
            return tf.random.uniform(shape)
        seed = tf.cast(seed, tf.int32) + tf.constant([0, 7919], tf.int32) * salt
        return tf.random.stateless_uniform(shape, seed=seed)

    def mask(self, token_ids, padding_mask, seed=None):
        """(corrupted token_ids, masked_positions, masked_ids, masked_weights)."""
        token_ids = tf.cast(token_ids, tf.int32)
        shape = tf.shape(token_ids)
        chosen = self.choose(token_ids, padding_mask, seed)
        draw = self._uniform(shape, seed, 1)
        if seed is None:
            random_ids = tf.random.uniform(shape, 0, self.vocabulary_size, tf.int32)
        else:
            random_ids = tf.random.stateless_uniform(
                shape, tf.cast(seed, tf.int32) + tf.constant([0, 15485863], tf.int32), 0,
                self.vocabulary_size, tf.int32)
        replaced = tf.where(draw < self.mask_prob, self.mask_id,
                            tf.where(draw < self.mask_prob + self.random_prob, random_ids,
                                     token_ids))
        corrupted = tf.where(chosen, replaced, token_ids)
        # Chosen positions first, in increasing order; then the rest.
        length = shape[1]
        positions = tf.range(length)[tf.newaxis, :]
        key = tf.where(chosen, positions, positions + length)
        pad_to = tf.maximum(self.max_predictions - length, 0)
        key = tf.pad(key, [[0, 0], [0, pad_to]], constant_values=2 * length)
        slots = tf.argsort(key, axis=1, stable=True)[:, :self.max_predictions]
        count = tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1, keepdims=True)
        weights = tf.range(self.max_predictions)[tf.newaxis, :] < count
        masked_positions = tf.where(weights, slots, 0)
        masked_ids = tf.where(weights, tf.gather(token_ids, masked_positions, batch_dims=1), 0)
        return corrupted, masked_positions, masked_ids, tf.cast(weights, tf.float32)

    def __call__(self, features, seed=None):
        corrupted, positions, ids, weights = self.mask(
            features["token_ids"], features["padding_mask"], seed)
        return to_fit_arguments(features, corrupted, positions, ids, weights)


def to_fit_arguments(features, token_ids, masked_positions, masked_ids, masked_weights):
    """(inputs, targets, sample_weights) in the layout `BertPretrainer` trains on."""
    inputs = {
        "token_ids": tf.cast(token_ids, tf.int32),
        "segment_ids": tf.cast(features["segment_ids"], tf.int32),
        "padding_mask": tf.cast(features["padding_mask"], tf.int32),
        "masked_positions": tf.cast(masked_positions, tf.int32),
    }
    targets = {"mlm": tf.cast(masked_ids, tf.int32)}
    weights = {"mlm": tf.cast(masked_weights, tf.float32)}
    if "next_sentence_label" in features:
        label = tf.cast(features["next_sentence_label"], tf.int32)
        targets["nsp"] = label
        weights["nsp"] = tf.ones_like(label, tf.float32)
    return inputs, targets, weights
