"""`compile()` with no optimizer gives a fine-tuning rate (the paper's 5e-5, keras-hub's "auto"),
and the pretrainer the paper's pre-training rate: Keras' own default, Adam at 1e-3, makes a
pretrained encoder forget."""

import keras
import numpy as np
import pytest

from kbert.models import BertBackbone, BertClassifier, BertFeatureClassifier, BertPretrainer
from kbert.optimizers import Adam
from tests.spans.helpers import tiny_config


def _inputs():
    ids = np.random.default_rng(0).integers(5, 40, (4, 6)).astype("int32")
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids),
            "padding_mask": np.ones_like(ids)}


def _largest_step(model, x, y):
    before = [np.array(w) for w in model.trainable_weights]
    model.train_on_batch(x, y)
    return max(np.abs(np.array(w) - b).max() for w, b in zip(model.trainable_weights, before))


@pytest.mark.slow
def test_classifier_compile_steps_at_the_fine_tuning_rate(tmp_path):
    """Adam's first step moves a weight by lr * |g| / (|g| + eps'): at most the rate, and
    within a hair of it for any weight with a real gradient."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(tiny_config()), num_classes=2)
    model.compile()
    assert isinstance(model.optimizer, Adam)
    assert float(model.optimizer.learning_rate) == pytest.approx(5e-5)
    step = _largest_step(model, _inputs(), np.array([0, 1, 0, 1]))
    assert 0.99 * 5e-5 < step <= 5e-5 * (1 + 1e-3)
    # The rate is the saved compile's: a loaded model goes on with it.
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert float(loaded.optimizer.learning_rate) == pytest.approx(5e-5)


@pytest.mark.slow
def test_pretrainer_compile_steps_at_the_pre_training_rate():
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertBackbone(tiny_config()))
    model.compile()
    x = dict(_inputs(), masked_positions=np.array([[1, 2]] * 4, "int32"))
    y = {"mlm": np.full((4, 2), 7, "int32"), "nsp": np.array([0, 1, 0, 1])}
    step = _largest_step(model, x, y)
    assert 0.99 * 1e-4 < step <= 1e-4 * (1 + 1e-3)


def test_a_frozen_encoder_trains_its_new_head_at_keras_rate():
    """Where no encoder weight trains (feature-based models, a frozen backbone), a fresh head
    alone learns: 5e-5 would barely move it, and nothing can forget."""
    frozen = BertBackbone(tiny_config())
    frozen.trainable = False
    for model in (BertFeatureClassifier(BertBackbone(tiny_config()), layers=(-2, -1)),
                  BertClassifier(frozen, num_classes=2)):
        model.compile()
        assert float(model.optimizer.learning_rate) == pytest.approx(1e-3), type(model)


def test_an_optimizer_named_by_the_user_is_keras_own():
    model = BertClassifier(BertBackbone(tiny_config()), num_classes=2)
    model.compile(optimizer="adam")
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-3)
