import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from kbert import BertBackbone
from kbert.training import WarmupPolynomialDecay, make_optimizer, no_decay_variables


def test_schedule_matches_hand_computation():
    schedule = WarmupPolynomialDecay(2e-5, total_steps=100, warmup_steps=10)
    expected = {0: 0.0, 1: 2e-6, 5: 1e-5, 10: 2e-5, 11: 2e-5 * 89 / 90, 55: 1e-5,
                99: 2e-5 / 90, 100: 0.0, 150: 0.0}
    for step, value in expected.items():
        assert float(schedule(step)) == pytest.approx(value, abs=1e-12), step


def test_make_optimizer_uses_ten_percent_warmup_and_clipping():
    optimizer = make_optimizer(5e-5, total_steps=1000)
    schedule = optimizer.learning_rate_schedule if hasattr(
        optimizer, "learning_rate_schedule") else optimizer._learning_rate
    assert schedule.warmup_steps == 100 and schedule.total_steps == 1000
    assert optimizer.global_clipnorm == 1.0 and optimizer.weight_decay == 0.01
    restored = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert float(restored(300)) == pytest.approx(float(schedule(300)))


@pytest.mark.parametrize("restored", [False, True])
@pytest.mark.parametrize("by_model", [True, False])
def test_weight_decay_skips_layer_norm_and_bias(tiny_config, by_model, restored):
    """`restored`: the optimizer is rebuilt from its config first, as loading a model does."""
    backbone = BertBackbone(tiny_config)
    lr, wd, step = 1e-3, 0.01, 50
    optimizer = make_optimizer(lr, total_steps=100, warmup_fraction=0.1, weight_decay=wd,
                               model=backbone if by_model else None)
    if restored:
        optimizer = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    variables = backbone.trainable_variables
    optimizer.build(variables)
    optimizer.iterations.assign(step)
    before = [v.numpy().copy() for v in variables]
    # Zero gradients: Adam's step is exactly 0, so only the decoupled decay moves a weight,
    # by var * wd * lr(step) with lr(50) = lr * (100 - 50) / 90.
    optimizer.apply_gradients([(keras.ops.zeros_like(v), v) for v in variables])
    factor = 1 - wd * lr * 50 / 90
    excluded = {id(v) for v in no_decay_variables(backbone)}
    assert excluded
    for v, old in zip(variables, before):
        is_norm_or_bias = v.name in ("gamma", "beta") or v.name.endswith("bias")
        assert (id(v) in excluded) == is_norm_or_bias, v.path
        expected = old if is_norm_or_bias else old * factor
        np.testing.assert_allclose(v.numpy(), expected, rtol=1e-6, atol=1e-9, err_msg=v.path)


@pytest.mark.parametrize("jit", [False, True])
def test_global_norm_from_touched_rows_equals_the_dense_norm(jit):
    """The clipping norm of an embedding gradient is taken from its touched rows only; it must
    equal Keras' norm of the densified gradients, duplicates summed, with XLA too."""
    import tensorflow as tf
    from keras.src.optimizers.base_optimizer import clip_by_global_norm

    from kbert.optimizers import AdamW

    rng = np.random.default_rng(0)
    indices = tf.constant(rng.integers(0, 50, 300), "int32")  # many repeats
    values = tf.constant(rng.normal(size=(300, 8)), "float32")
    other = tf.constant(rng.normal(size=(8, 3)), "float32")
    optimizer = AdamW(1e-3, global_clipnorm=1.0)

    def clipped(values, other):
        slices = tf.IndexedSlices(values, indices, tf.constant([60, 8]))
        pairs = optimizer._all_reduce_sum_gradients([(slices, None), (other, None)])
        return [g for g, _ in pairs]

    ours = tf.function(clipped, jit_compile=jit)(values, other)
    dense = tf.math.unsorted_segment_sum(values, indices, 60)
    expected = clip_by_global_norm([dense, other], 1.0)
    assert float(tf.linalg.global_norm([dense, other])) > 10  # the clip really scales
    for got, want in zip(ours, expected):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-9)
    bad = tf.tensor_scatter_nd_update(values, [[5, 0]], [np.inf])
    assert np.isnan(tf.function(clipped, jit_compile=jit)(bad, other)[1].numpy()).all()


def adamw_problem():
    """Initial weights and four steps of gradients for a kernel (decayed) and a bias (not);
    half the kernel's gradients are ~1e-6, where Keras' and Algorithm 1's ε part ways."""
    rng = np.random.default_rng(0)
    initial = [rng.normal(size=(7, 5)).astype("float32"), rng.normal(size=5).astype("float32")]
    scale = np.where(np.arange(7)[:, None] < 4, 1.0, 1e-6).astype("float32")
    steps = [[rng.normal(size=(7, 5)).astype("float32") * scale,
              rng.normal(size=5).astype("float32")] for _ in range(4)]
    return initial, steps


ADAMW = dict(learning_rate=1e-2, weight_decay=0.01, epsilon=1e-6)


def torch_adamw(initial, steps):
    """`torch.optim.AdamW` (Adam's Algorithm 1 with decoupled decay), the bias not decayed."""
    torch = pytest.importorskip("torch")

    weights = [torch.nn.Parameter(torch.tensor(w)) for w in initial]
    optimizer = torch.optim.AdamW(
        [{"params": weights[:1], "weight_decay": ADAMW["weight_decay"]},
         {"params": weights[1:], "weight_decay": 0.0}],
        lr=ADAMW["learning_rate"], betas=(0.9, 0.999), eps=ADAMW["epsilon"])
    for grads in steps:
        for w, g in zip(weights, grads):
            w.grad = torch.tensor(g)
        optimizer.step()
    return [w.detach().numpy() for w in weights]


def keras_steps(optimizer, initial, steps, jit=False):
    """The weights after `optimizer` applied `steps` (the bias excluded from decay), and the
    compiled step."""
    import tensorflow as tf

    weights = [keras.Variable(w) for w in initial]
    optimizer.exclude_from_weight_decay(var_list=weights[1:])
    optimizer.build(weights)
    step = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, weights)),
                       jit_compile=jit)
    for grads in steps:
        step([tf.constant(g) for g in grads])
    return [w.numpy() for w in weights], step


@pytest.mark.parametrize("jit", [False, True])
def test_adamw_equals_torch_adamw(jit):
    """kbert's AdamW steps as `torch.optim.AdamW` does (ε added to √v̂), with TensorFlow's fused
    ApplyAdam kernel; Keras' own AdamW, whose ε is added before the bias correction, does not
    on the small gradients."""
    import tensorflow as tf

    from kbert.optimizers import AdamW

    initial, steps = adamw_problem()
    want = torch_adamw(initial, steps)
    ours, step = keras_steps(AdamW(**ADAMW), initial, steps, jit)
    for got, expected in zip(ours, want):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    graph = step.get_concrete_function([tf.constant(g) for g in steps[0]]).graph
    assert "ResourceApplyAdam" in {op.type for op in graph.get_operations()}
    keras_own, _ = keras_steps(keras.optimizers.AdamW(**ADAMW), initial, steps, jit)
    small = (slice(4, 7), slice(None))
    moved, keras_moved = want[0] - initial[0], keras_own[0] - initial[0]
    assert np.abs(keras_moved[small] - moved[small]).max() > 0.1 * np.abs(moved[small]).max()


def test_adamw_equals_torch_adamw_on_jax(tmp_path):
    """On the JAX backend kbert's AdamW takes its Keras-ops path, with the same ε."""
    pytest.importorskip("jax")
    initial, steps = adamw_problem()
    np.savez(tmp_path / "problem.npz", *initial, *(g for grads in steps for g in grads))
    script = textwrap.dedent("""
        import sys
        import numpy as np, keras
        assert keras.backend.backend() == "jax"
        from kbert.optimizers import AdamW
        arrays = np.load(sys.argv[1])
        values = [arrays[f"arr_{n}"] for n in range(len(arrays.files))]
        weights = [keras.Variable(w) for w in values[:2]]
        optimizer = AdamW(learning_rate=1e-2, weight_decay=0.01, epsilon=1e-6)
        optimizer.exclude_from_weight_decay(var_list=weights[1:])
        for n in range(2, len(values), 2):
            optimizer.apply_gradients(zip(values[n:n + 2], weights))
        np.savez(sys.argv[2], *(np.asarray(w) for w in weights))
    """)
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "problem.npz"),
                             str(tmp_path / "out.npz")], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    for n, expected in enumerate(torch_adamw(initial, steps)):
        np.testing.assert_allclose(out[f"arr_{n}"], expected, rtol=1e-6, atol=1e-7)


def test_adamw_refuses_amsgrad():
    from kbert.optimizers import AdamW

    with pytest.raises(ValueError, match="amsgrad"):
        AdamW(amsgrad=True)


def test_lamb_keeps_its_decay_exclusions_through_its_config(tiny_config):
    """With zero gradients LAMB's update is λ·w scaled by the trust ratio ||w|| / ||λ·w||, so a
    decayed weight moves to w·(1 - lr) and an excluded one stays; the same after a rebuild
    from the config."""
    from kbert.optimizers import Lamb

    backbone = BertBackbone(tiny_config)
    original = Lamb(0.01, weight_decay_rate=0.01)
    original.exclude_from_weight_decay(var_list=no_decay_variables(backbone))
    optimizer = keras.optimizers.deserialize(keras.optimizers.serialize(original))
    variables = backbone.trainable_variables
    before = [v.numpy().copy() for v in variables]
    optimizer.apply_gradients([(keras.ops.zeros_like(v), v) for v in variables])
    excluded = {id(v) for v in no_decay_variables(backbone)}
    for v, old in zip(variables, before):
        expected = old if id(v) in excluded else old * (1 - 0.01)
        np.testing.assert_allclose(v.numpy(), expected, rtol=1e-5, atol=1e-9, err_msg=v.path)
