import re

import keras
import numpy as np
import pytest

from kbert import BertBackbone, BertConfig, BertPretrainer
from tests.conftest import make_inputs


def _batch(config, batch=8, seq_len=12, predictions=3, seed=0):
    rng = np.random.default_rng(seed)
    x = make_inputs(batch, seq_len, config.vocab_size, seed)
    x["padding_mask"][:] = 1
    x["token_ids"] = rng.integers(1, config.vocab_size, (batch, seq_len)).astype("int32")
    x["masked_positions"] = rng.integers(1, seq_len, (batch, predictions)).astype("int32")
    weights = np.ones((batch, predictions), "float32")
    weights[::2, -1] = 0.0  # padded prediction slots
    y = {"mlm": rng.integers(1, config.vocab_size, (batch, predictions)).astype("int32"),
         "nsp": rng.integers(0, 2, batch).astype("int32")}
    return x, y, {"mlm": weights, "nsp": np.ones(batch, "float32")}


@pytest.mark.slow
def test_fit_learns_and_reports_bert_metrics(tiny_config):
    model = BertPretrainer(BertBackbone(tiny_config))
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    x, y, w = _batch(tiny_config)
    history = model.fit(x, y, sample_weight=w, epochs=30, verbose=0).history
    assert {"mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"} <= set(history)
    assert history["mlm_loss"][-1] < 0.5 * history["mlm_loss"][0]
    assert history["mlm_accuracy"][-1] > 0.5


def test_losses_and_accuracy_count_only_real_predictions(tiny_config):
    model = BertPretrainer(BertBackbone(tiny_config))
    model.compile()
    x, y, w = _batch(tiny_config)
    logits = model.predict(x, verbose=0)
    log_probs = logits["mlm"] - np.log(np.exp(logits["mlm"]).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, y["mlm"][..., None], -1)[..., 0]
    mlm_loss = (nll * w["mlm"]).sum() / w["mlm"].sum()  # Google's normalisation
    correct = logits["mlm"].argmax(-1) == y["mlm"]
    mlm_acc = (correct * w["mlm"]).sum() / w["mlm"].sum()
    result = model.evaluate(x, y, sample_weight=w, batch_size=8, verbose=0, return_dict=True)
    assert result["mlm_loss"] == pytest.approx(mlm_loss, rel=1e-4)
    assert result["mlm_accuracy"] == pytest.approx(mlm_acc, abs=1e-6)


def test_mlm_logits_at_masked_positions_use_the_tied_embeddings(tiny_config):
    model = BertPretrainer(BertBackbone(tiny_config))
    assert model.mlm_head.token_embedding is model.backbone.token_embedding
    embedding_vars = [w for w in model.weights if w.path.endswith("token_embedding/embeddings")]
    assert len(embedding_vars) == 1


@pytest.mark.slow
def test_no_nsp_ablation(tiny_config):
    model = BertPretrainer(BertBackbone(tiny_config), use_nsp=False)
    x, y, w = _batch(tiny_config)
    assert set(model.predict(x, verbose=0)) == {"mlm"}
    model.compile()
    history = model.fit(x, {"mlm": y["mlm"]}, sample_weight={"mlm": w["mlm"]}, verbose=0).history
    assert "nsp_loss" not in history and "mlm_accuracy" in history


def test_save_and_load(tiny_config, tmp_path):
    model = BertPretrainer(BertBackbone(tiny_config))
    model.save(tmp_path / "pretrainer.keras")
    loaded = keras.saving.load_model(tmp_path / "pretrainer.keras", safe_mode=True)
    x, _, _ = _batch(tiny_config)
    a, b = model.predict(x, verbose=0), loaded.predict(x, verbose=0)
    for key in ("mlm", "nsp"):
        np.testing.assert_array_equal(a[key], b[key])
    assert loaded.mlm_head.token_embedding is loaded.backbone.token_embedding


def _full_sequence_pretrainer(model):
    """`model`'s layers wired the plain way: the head gathers the backbone's whole output."""
    backbone = model.backbone
    encoded = backbone({k: model.input[k] for k in backbone.input})
    return keras.Model(model.input, {
        "mlm": model.mlm_head(encoded["sequence_output"], model.input["masked_positions"]),
        "nsp": model.nsp_head(encoded["pooled_output"])})


@pytest.mark.slow
def test_the_last_block_runs_at_cls_and_the_masked_positions_only(tiny_config):
    """Under XLA the FFN's first projection runs over every token in each block but the last,
    and there over `[CLS]` and the masked positions: what the loss reads (the rest of the last
    block is pruned). The full-sequence wiring runs it over every token in every block (and
    at `[CLS]` apart, for the pooler)."""
    import tensorflow as tf

    model = BertPretrainer(BertBackbone(tiny_config))
    x, _, _ = _batch(tiny_config, batch=3, seq_len=16, predictions=5)
    width = tiny_config.intermediate_size

    def ffn_rows(m):
        hlo = tf.function(lambda x: m(x, training=True), jit_compile=True
                          ).experimental_get_compiler_ir(x)(stage="optimized_hlo")
        return sorted(int(rows) for rows in re.findall(rf"= f32\[(\d+),{width}\]\S* dot\(", hlo))

    assert ffn_rows(model) == [3 * (1 + 5)] + [3 * 16] * (tiny_config.num_layers - 1)
    assert ffn_rows(_full_sequence_pretrainer(model)) == [3] + [3 * 16] * tiny_config.num_layers


def test_loss_and_gradients_equal_the_full_sequence_path(tiny_config):
    import tensorflow as tf

    config = BertConfig.from_dict({**tiny_config.to_dict(), "hidden_dropout": 0.0,
                                   "attention_dropout": 0.0})
    model = BertPretrainer(BertBackbone(config))
    full = _full_sequence_pretrainer(model)
    x, y, _ = _batch(config, predictions=4)
    x["padding_mask"][1:, 9:] = 0
    results = []
    for m in (model, full):
        with tf.GradientTape() as tape:
            out = m(x, training=True)
            loss = tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(
                y["mlm"], out["mlm"], from_logits=True)) + tf.reduce_sum(out["nsp"][:, 0])
        results.append((loss, tape.gradient(loss, model.trainable_weights)))
    (loss, grads), (want_loss, want_grads) = results
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    assert len(grads) == len(want_grads) and all(g is not None for g in grads)
    for weight, got, want in zip(model.trainable_weights, grads, want_grads):
        np.testing.assert_allclose(tf.convert_to_tensor(got), tf.convert_to_tensor(want),
                                   rtol=1e-4, atol=1e-6, err_msg=weight.path)
