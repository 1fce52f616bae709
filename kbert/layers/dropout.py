"""Dropout whose random bits come from a counter-based integer hash.

Keras' dropout draws its mask from TensorFlow's stateless Philox generator, which XLA compiles
for a CPU into something slower than the whole rest of a BERT-mini training step. A keep/drop
decision does not need a cryptographic-strength
stream. Here each element's 32 random bits are a keyed hash of its index: two rounds of a 32-bit
integer mixer (xor-shift-multiply, the "lowbias32" constants), a dozen vectorisable integer ops
per element. The key is derived from the layer's `SeedGenerator`
state, which advances on every training call, so every step and every layer draws a fresh mask.

Everything else is `keras.layers.Dropout`: an element is kept with probability 1 - rate and
scaled by 1 / (1 - rate); at inference the layer is the identity.
"""

import keras
from keras import ops

from kbert import tensorflow_backend

# Backends with wrapping uint32 arithmetic and shifts; others use Keras' own generator.
_HASH_BACKENDS = ("tensorflow", "jax")
_GOLDEN = 0x9E3779B9  # 2³² / golden ratio: spreads consecutive integers across the range.


def _mix(h):
    """A bijection of uint32 that sends every input bit to about half of the output bits."""
    h = ops.bitwise_xor(h, ops.right_shift(h, 16))
    h = ops.multiply(h, ops.cast(0x7FEB352D, "uint32"))
    h = ops.bitwise_xor(h, ops.right_shift(h, 15))
    h = ops.multiply(h, ops.cast(0x846CA68B, "uint32"))
    return ops.bitwise_xor(h, ops.right_shift(h, 16))


def hash_keys(seed):
    """The two uint32 keys of `hash_bits`, from `seed`: two integers (a `SeedGenerator` state).

    The first shifts the index before one mixing round, the second is xor-ed in before the
    next, so calls whose first key differs by d do not repeat each other's bits d elements
    apart.
    """
    seed = ops.cast(seed, "uint32")
    first = _mix(ops.add(_mix(seed[1]), ops.multiply(seed[0], ops.cast(_GOLDEN, "uint32"))))
    second = _mix(ops.add(first, ops.cast(_GOLDEN, "uint32")))
    return first, second


def hash_bits(index, first, second):
    """32 random bits for each uint32 `index` under the keys: what `random_bits` gives the
    element at that flat index (the flash attention kernel draws its dropout with it)."""
    return _mix(ops.bitwise_xor(_mix(ops.add(index, first)), second))


def random_bits(like, seed):
    """uint32 bits shaped like the tensor `like`, a keyed hash of each element's flat index
    under the keys `hash_keys(seed)`."""
    index = ops.reshape(ops.arange(ops.size(like), dtype="int32"), ops.shape(like))
    return hash_bits(ops.cast(index, "uint32"), *hash_keys(seed))


def dropped(x, seed, threshold, scale):
    """`x` times `scale` where its `random_bits` are at or above `threshold`, else 0."""
    keep = ops.greater_equal(random_bits(x, seed), threshold)
    return ops.where(keep, ops.multiply(x, scale), ops.zeros_like(x))


@keras.saving.register_keras_serializable(package="kbert")
class Dropout(keras.layers.Layer):
    """Inverted dropout with hash-based masks (see the module docstring).

    >>> layer = Dropout(0.1, seed=0)
    >>> y = layer(ops.ones((4, 8)), training=True)   # ~10% zeros, the rest 1/0.9
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate}.")
        self.rate = float(rate)
        self.seed = seed
        self.supports_masking = True
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        backend = keras.backend.backend()
        if backend not in _HASH_BACKENDS:
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        # Kept when the bits are at or above rate·2³²: probability 1 - rate to within 2⁻³².
        threshold = ops.cast(int(round(self.rate * 2**32)), "uint32")
        scale = ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        # Compiled on TensorFlow, where a step may run without XLA (see `compiled_linear`).
        drop = (tensorflow_backend.compiled_linear(dropped) if backend == "tensorflow"
                else dropped)
        return drop(inputs, self.seed_generator.next(), threshold, scale)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
