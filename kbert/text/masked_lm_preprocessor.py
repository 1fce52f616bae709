"""BertMaskedLMPreprocessor: raw text → masked-LM training batches, in the graph.

keras-hub's `BertMaskedLMPreprocessor` for kbert: strings (or `(a, b)` pairs) are packed by a
`BertPreprocessor` (`[CLS] A [SEP] B [SEP]`, Google's truncation), then corrupted by kbert's
masking op (`kbert.text.masking.MaskedLM`, the one the pre-training pipeline uses): 15% of the
real tokens, never [CLS]/[SEP]/[PAD]/[MASK], at most `max_predictions` (20 at length 128), of
which 80% become [MASK], 10% a random id and 10% stay. So `BertPretrainer(backbone,
preprocessor=...)` fits on a list of strings.

Next sentence prediction: `y` holds the NSP labels of `(a, b)` pairs (0 IsNext, 1 NotNext);
with no `y` only the masked LM is trained, and `BertPretrainer` with `use_nsp=True` refuses raw
text without labels. Building the pairs (50% true next segment, 50% from another document) is
the pre-training pipeline's work (`kbert.data.pretraining`), not this layer's.
"""

import keras

from kbert.text.datasets import batched_dataset, prefetched
from kbert.text.masking import MaskedLM, default_max_predictions, to_fit_arguments
from kbert.text.preprocessor import BertPreprocessor
from kbert.text.preprocessor_base import PreprocessorBase, traced
from kbert.text.tf_libs import tf
from kbert.text.trim import trim_to_longest


@keras.saving.register_keras_serializable(package="kbert")
class BertMaskedLMPreprocessor(PreprocessorBase):
    """Packs and masks raw text into masked-LM training batches for `BertPretrainer`.

    Text is packed as `BertPreprocessor` packs it, then `mask_rate` of the real tokens (never
    [CLS], [SEP], [PAD] or [MASK]; at most `max_predictions`) are chosen for prediction: of
    those, `mask_token_rate` become [MASK], `random_token_rate` a random id and the rest stay.
    Give it as `BertPretrainer(backbone, preprocessor=...)` and `fit` takes a list of strings
    (the masked LM alone, `use_nsp=False`), or pairs and their next-sentence labels.

    Args:
      tokenizer: a `BertTokenizer`.
      sequence_length: the packed length, special tokens included.
      mask_rate: the share of real tokens chosen for prediction.
      max_predictions: the most chosen per sequence (None: 20 at length 128, else
        ceil(mask_rate · sequence_length)).
      mask_token_rate: of the chosen tokens, the share replaced by [MASK].
      random_token_rate: of the chosen tokens, the share replaced by a random id.
      seed: makes `dataset()`'s masks reproducible (fresh ones every epoch all the same).
      **kwargs: passed to `keras.layers.Layer` (e.g. `name`).

    Call arguments:
      x: strings [batch], or a pair `(texts_a, texts_b)` of them.
      y: next-sentence labels of the pairs (0 IsNext, 1 NotNext), or None.
      sample_weight: one weight per example for both losses, or None.

    Returns:
      A tuple `(inputs, targets, sample_weights)`: `inputs` the backbone's three int32
      [batch, sequence_length] tensors, `token_ids` masked, plus `masked_positions` [batch,
      max_predictions]; `targets` `{"mlm": the original ids at those positions}` (and `"nsp"`,
      the labels `y`); `sample_weights` `{"mlm": 1.0 at real predictions, 0.0 at padding
      slots}` (and `"nsp"`).

    Examples:
        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> preprocessor = kbert.BertMaskedLMPreprocessor(tokenizer, sequence_length=12)
        >>> preprocessor.max_predictions  # ceil(0.15 * 12)
        2
        >>> inputs, targets, weights = preprocessor(["The quick brown fox jumped over the dog."])
        >>> sorted(inputs)
        ['masked_positions', 'padding_mask', 'segment_ids', 'token_ids']
        >>> tuple(inputs["token_ids"].shape), tuple(targets["mlm"].shape)
        ((1, 12), (1, 2))

        Pairs with next-sentence labels train both heads:

        >>> inputs, targets, weights = preprocessor((["The fox ran."], ["It was quick."]), [0])
        >>> sorted(targets), targets["nsp"].numpy().tolist()
        (['mlm', 'nsp'], [0])
    """

    def __init__(self, tokenizer, sequence_length=128, mask_rate=0.15, max_predictions=None,
                 mask_token_rate=0.8, random_token_rate=0.1, seed=None, **kwargs):
        super().__init__(tokenizer, **kwargs)
        for name, rate in (("mask_token_rate", mask_token_rate),
                           ("random_token_rate", random_token_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {rate}.")
        if mask_token_rate + random_token_rate > 1.0:
            raise ValueError(f"mask_token_rate + random_token_rate must be at most 1, got "
                             f"{mask_token_rate} + {random_token_rate}.")
        self.packer = BertPreprocessor(tokenizer, sequence_length)  # checks both arguments
        self.sequence_length = self.packer.sequence_length
        self.mask_rate = float(mask_rate)
        self.max_predictions = int(max_predictions or default_max_predictions(
            self.sequence_length, self.mask_rate))
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.seed = seed
        self.masker = MaskedLM.from_tokenizer(
            tokenizer, mask_rate=self.mask_rate, max_predictions=self.max_predictions,
            mask_prob=self.mask_token_rate, random_prob=self.random_token_rate)

    def call(self, x, y=None, sample_weight=None):
        """Packs and masks one batch (masks from TensorFlow's global generator); see the
        class docstring."""
        return self._mask(self.packer(x), y, sample_weight)

    def _mask(self, features, y=None, sample_weight=None, seed=None):
        """Packed features → the (inputs, targets, sample_weights) `BertPretrainer` fits on;
        `seed` an int32 pair for stateless masks."""
        if y is not None:
            features = {**features, "next_sentence_label": y}
        corrupted, positions, ids, weights = self.masker.mask(
            features["token_ids"], features["padding_mask"], seed)
        inputs, targets, weights = to_fit_arguments(features, corrupted, positions, ids,
                                                    weights)
        if sample_weight is not None:  # one weight per example, for both losses
            row = tf.cast(sample_weight, tf.float32)
            weights = {k: v * (row[:, None] if k == "mlm" else row) for k, v in weights.items()}
        return inputs, targets, weights

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                pad_to_multiple_of=1):
        """A tf.data.Dataset of masked batches of raw text: what `BertPretrainer.fit` /
        `evaluate` run on.

        Each batch is cut to its longest row before masking. Masks are drawn afresh every time
        a batch is produced (dynamic masking); with a seed the sequence of masks is
        reproducible.

        Args:
          x: strings, or a pair `(texts_a, texts_b)` of lists; or a `tf.data.Dataset` of
            batches of raw `x` or `(x, nsp_labels)`.
          y: next-sentence labels of the pairs (0 IsNext, 1 NotNext), or None.
          sample_weight: one weight per example, or None.
          batch_size: examples per batch.
          shuffle: shuffle the examples (afresh every epoch).
          seed: seeds the shuffle and the masks (None: the layer's `seed`).
          pad_to_multiple_of: round each batch's length up to a multiple of this (for XLA,
            which compiles once per shape).

        Returns:
          A `tf.data.Dataset` of `(inputs, targets, sample_weights)`, as `call` returns them.

        Examples:
            >>> import kbert
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertMaskedLMPreprocessor(tokenizer, sequence_length=12)
            >>> dataset = preprocessor.dataset(["a b c d", "e f g h"], batch_size=2, seed=1)
            >>> inputs, targets, weights = next(iter(dataset))
            >>> tuple(inputs["token_ids"].shape), tuple(inputs["masked_positions"].shape)
            ((2, 6), (2, 2))
        """
        self._check_labels(x, y)
        seed = self.seed if seed is None else seed

        def pack(x, *rest):
            return (trim_to_longest(traced(self.packer)(x), pad_to_multiple_of),) + rest

        packed = batched_dataset(x, y, sample_weight, pack, batch_size, shuffle, seed)
        # Two random int64s per batch seed its masks: reproducible with a seed, and fresh in
        # every epoch (each pass over the dataset draws anew).
        draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        has_y, has_weight = y is not None, sample_weight is not None

        def mask(element, draw):
            features, *rest = element if isinstance(element, tuple) else (element,)
            if has_weight and not has_y:  # batched_dataset left the missing labels out
                rest = [None] + rest
            labels = rest[0] if rest else None
            weights = rest[1] if len(rest) > 1 else None
            seed_pair = tf.cast(draw % tf.int32.max, tf.int32)
            return self._mask(features, labels, weights, seed_pair)

        return prefetched(tf.data.Dataset.zip((packed, draws)).map(
            mask, num_parallel_calls=tf.data.AUTOTUNE))

    @staticmethod
    def _check_labels(x, y):
        if y is None or isinstance(x, tf.data.Dataset):
            return
        if not (isinstance(x, tuple) and len(x) == 2):
            raise ValueError("y holds next-sentence labels (0 IsNext, 1 NotNext), which need "
                             "sentence pairs: give x as a tuple (texts_a, texts_b), or leave "
                             "y out to train the masked LM alone.")

    def compute_output_spec(self, x, y=None, sample_weight=None):
        """The `keras.KerasTensor`s `call` returns for symbolic inputs."""
        inputs = self.packer.compute_output_spec(x)
        batch = next(iter(inputs.values())).shape[:1]
        inputs["masked_positions"] = keras.KerasTensor(batch + (self.max_predictions,), "int32")
        predictions = keras.KerasTensor(batch + (self.max_predictions,), "int32")
        weights = keras.KerasTensor(batch + (self.max_predictions,), "float32")
        targets, sample_weights = {"mlm": predictions}, {"mlm": weights}
        if y is not None:
            targets["nsp"] = keras.KerasTensor(batch, "int32")
            sample_weights["nsp"] = keras.KerasTensor(batch, "float32")
        return inputs, targets, sample_weights

    def get_config(self):
        """The layer's config: the tokenizer, the packed length and the masking settings."""
        config = super().get_config()
        config.update({
            "sequence_length": self.sequence_length,
            "mask_rate": self.mask_rate,
            "max_predictions": self.max_predictions,
            "mask_token_rate": self.mask_token_rate,
            "random_token_rate": self.random_token_rate,
            "seed": self.seed,
        })
        return config
