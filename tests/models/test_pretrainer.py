import keras
import numpy as np
import pytest

from kbert import BertBackbone, BertPretrainer
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
