import math

import numpy as np
import pytest
from keras import ops

from kbert.layers import TransformerEncoderBlock, attention_bias
from kbert.layers.activations import gelu, gelu_tanh


def _block(hidden=16, heads=4, activation="gelu"):
    block = TransformerEncoderBlock(num_heads=heads, intermediate_size=32, activation=activation)
    block.build((None, None, hidden))
    return block


def _layer_norm(x, eps=1e-12):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _erf_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _tanh_gelu(x):
    """google-research/bert modeling.py `gelu`: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _numpy_block(block, x, mask, activation=_erf_gelu):
    """BERT's post-LN block written out with numpy, from the paper's description."""
    heads, d = block.num_heads, block.head_size
    w_qkv, b_qkv = block.qkv_dense.kernel.numpy(), block.qkv_dense.bias.numpy()
    q, k, v = np.split(x @ w_qkv + b_qkv, 3, axis=-1)
    split = lambda t: t.reshape(t.shape[0], t.shape[1], heads, d).transpose(0, 2, 1, 3)
    scores = split(q) @ split(k).transpose(0, 1, 3, 2) / math.sqrt(d)
    scores = np.where(mask[:, None, None, :] > 0, scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    ctx = (probs @ split(v)).transpose(0, 2, 1, 3).reshape(x.shape)
    attn = ctx @ block.attention_output_dense.kernel.numpy() + block.attention_output_dense.bias.numpy()
    h = _layer_norm(x + attn)
    inner = h @ block.intermediate_dense.kernel.numpy() + block.intermediate_dense.bias.numpy()
    inner = activation(inner)
    out = inner @ block.output_dense.kernel.numpy() + block.output_dense.bias.numpy()
    return _layer_norm(h + out)


def test_matches_a_numpy_transcription_of_the_paper():
    block = _block()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
    got = np.asarray(block(x, attention_bias=attention_bias(mask), training=False))
    want = _numpy_block(block, x.astype("float64"), mask)
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_training_layout_computes_the_same_block():
    """Training contracts with values laid out differently (see the block); without dropout it
    must be the same function as at inference, gradients included."""
    import tensorflow as tf

    block = TransformerEncoderBlock(num_heads=4, intermediate_size=32, dropout=0.0,
                                    attention_dropout=0.0)
    block.build((None, None, 16))
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 5, 16)).astype("float32"))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
    bias = attention_bias(mask)
    want = _numpy_block(block, x.numpy().astype("float64"), mask)
    grads = []
    for training in (False, True):
        with tf.GradientTape() as tape:
            y = block(x, attention_bias=bias, training=training)
            loss = tf.reduce_sum(y * tf.range(1.0, 17.0))
        np.testing.assert_allclose(y.numpy(), want, atol=2e-5)
        grads.append(tape.gradient(loss, block.trainable_variables))
    for inference, training in zip(*grads):
        np.testing.assert_allclose(training.numpy(), inference.numpy(), rtol=1e-4, atol=1e-5)


def test_padding_is_hidden_from_real_tokens():
    block = _block()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 6, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0]])
    bias = attention_bias(mask)
    changed = x.copy()
    changed[:, 4:] = rng.normal(size=(1, 2, 16)) * 50
    a, probs = block(x, attention_bias=bias, return_attention=True)
    b = block(changed, attention_bias=bias)
    np.testing.assert_allclose(np.asarray(a)[:, :4], np.asarray(b)[:, :4], atol=1e-6)
    probs = np.asarray(probs)
    assert probs.shape == (1, 4, 6, 6)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    assert probs[..., 4:].max() == 0.0


def test_causal_mask_hides_the_future():
    block = _block()
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 6, 16)).astype("float32")
    bias = attention_bias(np.ones((1, 6)), causal=True)
    changed = x.copy()
    changed[:, 3:] += 10.0
    a, probs = block(x, attention_bias=bias, return_attention=True)
    b = block(changed, attention_bias=bias)
    np.testing.assert_allclose(np.asarray(a)[:, :3], np.asarray(b)[:, :3], atol=1e-6)
    assert not np.allclose(np.asarray(a)[:, 3:], np.asarray(b)[:, 3:])
    assert np.triu(np.asarray(probs)[0, 0], k=1).max() == 0.0


def test_output_at_a_few_tokens_is_the_full_blocks_output_there():
    """`query` (the states of a few tokens) must give the full block's rows at those tokens,
    with padding ([CLS] and other, repeated and unordered positions), in float32 and in bf16
    compute, and the same gradients as the full output's rows there; and agree with the numpy
    transcription. Keys and values are projected once for both outputs."""
    import tensorflow as tf

    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(3, 6, 16)).astype("float32"))
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], "int32")
    bias = attention_bias(mask)
    positions = np.array([[0, 5], [3, 0], [1, 1]], "int32")
    weights = tf.constant(rng.normal(size=(3, 2, 16)).astype("float32"))
    for dtype, atol in (("float32", 2e-6), ("mixed_bfloat16", 0.05)):
        block = TransformerEncoderBlock(num_heads=4, intermediate_size=32, dropout=0.0,
                                        attention_dropout=0.0, dtype=dtype)
        block.build((None, None, 16))
        projected = []  # the rows of every input to the fused q/k/v projection
        project = block.qkv_dense.call
        block.qkv_dense.call = lambda rows, **kw: projected.append(rows.shape[0]) or project(rows)
        for training in (False, True):
            with tf.GradientTape(persistent=True) as tape:
                full, some = block(x, attention_bias=bias, training=training,
                                   query=tf.gather(x, positions, batch_dims=1))
                picked = tf.gather(full, positions, batch_dims=1)
                losses = (tf.reduce_sum(tf.cast(some, "float32") * weights),
                          tf.reduce_sum(tf.cast(picked, "float32") * weights))
            assert some.shape == (3, 2, 16) and projected == [3 * 6, 3 * 2]
            projected.clear()
            np.testing.assert_allclose(np.asarray(some, "float32"),
                                       np.asarray(picked, "float32"), atol=atol)
            if dtype == "float32":
                for got, want in zip(tape.gradient(losses[0], block.trainable_weights),
                                     tape.gradient(losses[1], block.trainable_weights)):
                    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        if dtype == "float32":
            want = _numpy_block(block, x.numpy().astype("float64"), mask)
            np.testing.assert_allclose(some.numpy(), np.take_along_axis(
                want, positions[..., None], axis=1), atol=2e-5)
    with pytest.raises(ValueError, match="causal bias"):
        block(x, attention_bias=attention_bias(mask, causal=True), query=x[:, :1])
    with pytest.raises(ValueError, match="no `return_attention`"):
        block(x, attention_bias=bias, query=x[:, :1], return_attention=True)


def test_gelu_forms():
    x = np.linspace(-4, 4, 101)
    exact, tanh = _erf_gelu(x), _tanh_gelu(x)
    np.testing.assert_allclose(np.asarray(gelu(ops.convert_to_tensor(x))), exact, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gelu_tanh(ops.convert_to_tensor(x))), tanh, atol=1e-6)
    assert np.abs(exact - tanh).max() > 1e-4  # the two forms really differ


def test_exact_gelu_in_float32_over_the_tails():
    x = np.linspace(-12, 12, 2401)
    exact = _erf_gelu(x)
    got = np.asarray(gelu(ops.convert_to_tensor(x, "float32")))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, exact, atol=2e-6, rtol=0)


def test_activation_comes_from_the_config():
    block = _block(activation="gelu_tanh")
    rng = np.random.default_rng(3)
    for dense in (block.qkv_dense, block.attention_output_dense, block.intermediate_dense,
                  block.output_dense):  # seeded, wide enough that pre-activations reach |x| ~ 2
        dense.kernel.assign(rng.normal(scale=0.5, size=dense.kernel.shape).astype("float32"))
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    mask = np.ones((2, 5), "int32")
    got = np.asarray(block(x, attention_bias=attention_bias(mask), training=False))
    tanh_form = _numpy_block(block, x.astype("float64"), mask, activation=_tanh_gelu)
    erf_form = _numpy_block(block, x.astype("float64"), mask, activation=_erf_gelu)
    np.testing.assert_allclose(got, tanh_form, atol=2e-5)
    assert np.abs(got - erf_form).max() > 2e-4  # ten times the tolerance: the choice shows


def test_config_round_trip_and_bad_width():
    block = _block()
    assert TransformerEncoderBlock.from_config(block.get_config()).get_config() == block.get_config()
    with pytest.raises(ValueError, match="not divisible"):
        TransformerEncoderBlock(num_heads=3, intermediate_size=8).build((None, None, 16))


def test_backward_graph_has_no_slice_gradients():
    """TensorFlow without XLA (kbert finetune's default) turns a slice's gradient into a
    full-size zero tensor with the slice scattered in; the fused q/k/v split must avoid it."""
    import tensorflow as tf

    block = TransformerEncoderBlock(num_heads=2, intermediate_size=16)
    x = tf.random.normal((2, 5, 8))
    block(x)

    @tf.function
    def gradients(x):
        with tf.GradientTape() as tape:
            y = block(x, training=True)
        return tape.gradient(y, block.trainable_variables)

    graph = gradients.get_concrete_function(x).graph
    op_types = {op.type for op in graph.get_operations()}
    assert "MatMul" in op_types or "BatchMatMulV2" in op_types  # the backward pass is there
    assert "StridedSliceGrad" not in op_types
