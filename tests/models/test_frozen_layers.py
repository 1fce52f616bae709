"""Layers frozen by hand stay frozen through `save` and `load_model` (they came back trainable:
Keras rebuilds kbert models from their constructor arguments), for a backbone's own layers and
their parts and for a task model's head."""

import keras
import numpy as np
import pytest

from kbert.models import BertBackbone, BertClassifier
from tests.spans.helpers import tiny_config


def _trainable(model):
    return sorted(w.path for w in model.trainable_weights)


@pytest.mark.slow
def test_frozen_layers_survive_save_and_load(tmp_path):
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(tiny_config()), num_classes=2)
    everything = _trainable(model)
    model.backbone.get_layer("embeddings").trainable = False
    model.backbone.get_layer("transformer_layer_1").qkv_dense.trainable = False
    model.get_layer("classifier").trainable = False
    trainable = _trainable(model)
    assert len(trainable) < len(everything)
    assert model.backbone.get_config()["frozen_layers"] == [
        "embeddings", "transformer_layer_1/attention_qkv"]
    assert model.get_config()["frozen_layers"] == ["classifier"]
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert _trainable(loaded) == trainable
    # The same weights train: one step moves exactly the trainable ones.
    loaded.compile(optimizer=keras.optimizers.SGD(0.5))
    ids = np.random.default_rng(0).integers(5, 40, (4, 6)).astype("int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
              "padding_mask": np.ones_like(ids)}
    before = {w.path: np.array(w) for w in loaded.weights}
    loaded.train_on_batch(inputs, np.array([0, 1, 0, 1]))
    moved = sorted(w.path for w in loaded.weights if not np.array_equal(before[w.path], w))
    assert moved and set(moved) <= set(trainable)


def test_a_frozen_model_and_unknown_names():
    backbone = BertBackbone(tiny_config(), trainable=False)
    assert backbone.trainable_weights == [] and backbone.get_config()["frozen_layers"] == []
    with pytest.raises(ValueError, match="'transformer_layer_7', which BertBackbone does not "
                                         "have; its layers: .*embeddings"):
        BertBackbone(tiny_config(), frozen_layers=["transformer_layer_7"])
    frozen = BertBackbone(tiny_config(), frozen_layers=["embeddings/token_embedding", "pooler"])
    assert frozen.get_config()["frozen_layers"] == ["embeddings/token_embedding", "pooler"]
