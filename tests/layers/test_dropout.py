"""kbert's hash-based dropout: Bernoulli statistics, independence across calls, elements and
layers, the same bits compiled or not, and the layer contract of keras.layers.Dropout."""

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import keras
from kbert.layers.dropout import Dropout, random_bits

RATE = 0.1
N = 1 << 20


def dropped(layer, shape=(N,)):
    return np.asarray(layer(np.ones(shape, "float32"), training=True)) == 0


def within(fraction, p, n, sigmas=5):
    return abs(fraction - p) < sigmas * np.sqrt(p * (1 - p) / n)


def test_drop_rate_and_scaling():
    layer = Dropout(RATE, seed=1)
    out = np.asarray(layer(np.ones(N, "float32"), training=True))
    assert within((out == 0).mean(), RATE, N)
    np.testing.assert_allclose(out[out != 0], 1 / (1 - RATE), rtol=1e-6)


def test_masks_are_independent_across_calls_elements_and_layers():
    first, second = Dropout(RATE, seed=1), Dropout(RATE, seed=2)
    a, b, c = dropped(first), dropped(first), dropped(second)
    assert not np.array_equal(a, b)
    for x, y in ((a, b), (a, c), (a[1:], a[:-1]), (a[256:], a[:-256])):
        assert within((x & y).mean(), RATE ** 2, len(x))


def test_bits_are_uniform():
    bits = np.asarray(random_bits(np.zeros(N, "float32"), np.array([7, 3])))
    for shift in (0, 12, 24):  # low, middle and high bytes
        counts = np.bincount((bits >> shift) & 0xFF, minlength=256)
        assert stats.chisquare(counts).pvalue > 1e-4


def test_same_bits_eager_graph_and_xla():
    x, seed = tf.zeros((3, 5, 7)), tf.constant([11, 4])
    eager = random_bits(x, seed).numpy()
    for jit in (False, True):
        np.testing.assert_array_equal(
            tf.function(random_bits, jit_compile=jit)(x, seed).numpy(), eager)


def test_identity_at_inference_and_rate_zero():
    x = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    np.testing.assert_array_equal(np.asarray(Dropout(RATE)(x, training=False)), x)
    np.testing.assert_array_equal(np.asarray(Dropout(0.0)(x, training=True)), x)


def test_rejects_a_rate_outside_zero_one():
    with pytest.raises(ValueError, match="rate"):
        Dropout(1.0)


def test_config_round_trip():
    layer = Dropout(0.3, seed=5, name="d")
    again = Dropout.from_config(layer.get_config())
    assert (again.rate, again.seed, again.name) == (0.3, 5, "d")
    model = keras.Sequential([keras.Input((4,)), layer])
    assert model(np.ones((2, 4), "float32")).shape == (2, 4)


def test_compiled_tensorflow_path_equals_the_plain_ops_and_their_gradient():
    """TensorFlow runs `dropped` compiled, with a gradient that recomputes the mask; it must
    give what the plain ops give, forward and backward, in a graph with unknown lengths (how a
    trimmed batch reaches it) and eagerly."""
    layer = Dropout(0.3, seed=9)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((3, 11, 8)).astype("float32"))
    upstream = tf.constant(rng.standard_normal((3, 11, 8)).astype("float32"))

    def forward_and_gradient(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = layer(inputs, training=True)
        return y, tape.gradient(y, inputs, output_gradients=upstream)

    graph = tf.function(forward_and_gradient,
                        input_signature=[tf.TensorSpec((None, None, 8), tf.float32)])
    for run in (forward_and_gradient, graph):
        seed = layer.seed_generator.state.numpy()  # the state this call will draw from
        y, dx = run(x)
        keep = random_bits(x, seed).numpy() >= np.uint32(round(0.3 * 2**32))
        scale = np.float32(1 / 0.7)
        np.testing.assert_array_equal(y.numpy(), np.where(keep, x.numpy() * scale, 0))
        np.testing.assert_array_equal(dx.numpy(), np.where(keep, upstream.numpy() * scale, 0))
