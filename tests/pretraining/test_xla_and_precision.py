"""XLA and float16 in pre-training: `pretrain()` trains with each, the XLA-compiled model
computes what the plain one does, and float16's skipped steps still count."""

import numpy as np
import pytest

from tests.pretraining.test_pretrain import SMALL, small_config

RUN = dict(steps=6, batch_size=8, sequence_length=32, learning_rate=1e-3, warmup_steps=1,
           checkpoint_every=6, eval_examples=32, verbose=0, save_model=False)


@pytest.mark.slow
def test_pretrain_with_xla(tmp_path, corpus_file):
    from kbert.training.pretrain import pretrain

    result = pretrain(tmp_path / "run", config=small_config(), corpus=corpus_file,
                      jit_compile=True, **RUN)
    assert result["run"]["jit_compile"] is True  # Keras kept XLA on
    assert result["steps"] == 6 and np.isfinite(result["loss"])
    assert result["mlm_loss"] < result["start"]["mlm_loss"]


@pytest.mark.slow
def test_pretrain_with_float16_loss_scaling(tmp_path, corpus_file):
    from kbert.training.pretrain import pretrain

    result = pretrain(tmp_path / "run", config=small_config(), corpus=corpus_file,
                      mixed_precision="fp16", **RUN)
    assert result["run"]["mixed_precision"] == "mixed_float16"
    assert result["steps"] == 6 and np.isfinite(result["loss"])
    assert result["mlm_loss"] < result["start"]["mlm_loss"]


def batch(seed=0, size=8, length=32, predictions=5):
    rng = np.random.default_rng(seed)
    mask = np.ones((size, length), "int32")
    mask[:, length - 4:] = 0
    x = {"token_ids": rng.integers(1000, 30000, (size, length)).astype("int32") * mask,
         "segment_ids": np.broadcast_to(np.arange(length) >= length // 2,
                                        (size, length)).astype("int32"),
         "padding_mask": mask,
         "masked_positions": rng.integers(1, length - 4, (size, predictions)).astype("int32")}
    y = {"mlm": rng.integers(1000, 30000, (size, predictions)).astype("int32"),
         "nsp": rng.integers(0, 2, (size,)).astype("int32")}
    w = {"mlm": np.ones((size, predictions), "float32"), "nsp": np.ones((size,), "float32")}
    return x, y, w


@pytest.mark.slow
def test_xla_matches_uncompiled():
    """Same weights: the same logits within 1e-5 (measured ~2e-7), and after two AdamW steps
    the same weights within 1e-5 (measured ~4e-7; the steps move weights by 1.5e-3)."""
    import keras
    import tensorflow as tf

    from kbert.config import BertConfig
    from kbert.models.backbone import BertBackbone
    from kbert.models.pretrainer import BertPretrainer
    from kbert.training.optimizer import make_optimizer

    config = BertConfig(**dict(SMALL, hidden_dropout=0.0, attention_dropout=0.0))
    x, y, w = batch()
    keras.utils.set_random_seed(0)
    start = BertPretrainer(BertBackbone(config)).get_weights()
    runs = {}
    for jit in (False, True):
        model = BertPretrainer(BertBackbone(config))
        model.set_weights(start)
        model.compile(optimizer=make_optimizer(1e-3, 2, model=model, warmup_steps=0),
                      jit_compile=jit)
        assert model.jit_compile is jit
        logits = model.predict_on_batch(x)
        model.fit(tf.data.Dataset.from_tensors((x, y, w)).repeat(2), shuffle=False,
                  verbose=0)
        runs[jit] = logits, model.get_weights()
    (plain, plain_weights), (xla, xla_weights) = runs[False], runs[True]
    for name in ("mlm", "nsp"):
        np.testing.assert_allclose(xla[name], plain[name], rtol=0, atol=1e-5, err_msg=name)
    assert max(np.abs(a - b).max() for a, b in zip(plain_weights, start)) > 1e-3
    for a, b in zip(plain_weights, xla_weights):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)


@pytest.mark.parametrize("accumulation", [1, 2])
def test_float16_skipped_step_counts_as_a_step(accumulation):
    """Overflowing gradients: no update, the loss scale halves, and `iterations` still
    advances (Keras 3 alone would not count it); a skipped update under accumulation drops
    the gradients accumulated for it."""
    import keras

    from kbert.training.optimizer import LossScaleOptimizer
    from kbert.training.optimizer import make_optimizer

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    opt = make_optimizer(1e-2, 10, model=model, warmup_steps=0, loss_scale=True,
                         gradient_accumulation_steps=accumulation)
    assert isinstance(opt, LossScaleOptimizer)
    variables = model.trainable_variables
    opt.build(variables)
    scale = float(opt.dynamic_scale)

    def apply(value):
        opt.apply([keras.ops.full(v.shape, value) for v in variables], variables)

    for _ in range(accumulation - 1):
        apply(1.0)  # accumulated, no update yet
    before = [v.numpy().copy() for v in variables]
    apply(np.inf)
    assert int(opt.iterations) == 1 and float(opt.dynamic_scale) == scale / 2
    for v, old in zip(variables, before):
        np.testing.assert_array_equal(v.numpy(), old)
    if accumulation > 1:
        inner = opt.inner_optimizer
        assert all(not np.any(a.numpy()) for a in inner._accumulated_gradients)
    for _ in range(accumulation):
        apply(1.0)
    assert int(opt.iterations) == 2
    assert any(np.any(v.numpy() != old) for v, old in zip(variables, before))
