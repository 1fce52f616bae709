import keras
import numpy as np
import pytest

from kbert import BertBackbone
from kbert.data.tasks import make_dataset
from kbert.models.classifier import BertClassifier
from kbert.models.feature_extractor import BertFeatureClassifier, BertFeatureExtractor
from kbert.models.multiple_choice import BertMultipleChoice
from tests.conftest import make_inputs
from tests.tasks.helpers import VOCAB, preprocessor


@pytest.fixture
def config(tiny_config):
    import dataclasses

    return dataclasses.replace(tiny_config, vocab_size=len(VOCAB))


def choice_inputs(batch=3, choices=4, seq_len=8, vocab=40):
    parts = [make_inputs(batch, seq_len, vocab, seed=i) for i in range(choices)]
    return {k: np.stack([p[k] for p in parts], 1) for k in parts[0]}


def roundtrip(model, tmp_path, x):
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    return loaded


@pytest.mark.slow
def test_classifier_is_dense_on_pooled_output(config):
    model = BertClassifier(BertBackbone(config), num_classes=3)
    x = make_inputs(4, 10, config.vocab_size)
    logits = model.predict(x, verbose=0)
    pooled = model.backbone.predict(x, verbose=0)["pooled_output"]
    kernel, bias = model.classifier.get_weights()
    np.testing.assert_allclose(logits, pooled @ kernel + bias, rtol=1e-5, atol=1e-6)


def test_regression_uses_mse(config):
    model = BertClassifier(BertBackbone(config), num_classes=1)
    model.compile()
    x = make_inputs(4, 10, config.vocab_size)
    y = np.array([0.5, -1.0, 2.0, 0.0], "float32")
    scores = model.predict(x, verbose=0)
    assert scores.shape == (4, 1)
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    assert result["loss"] == pytest.approx(np.mean((scores[:, 0] - y) ** 2), rel=1e-5)
    assert {"mse", "pearson"} <= set(result)


def test_multiple_choice_scores_each_choice_as_its_own_input(config):
    model = BertMultipleChoice(BertBackbone(config), num_choices=4)
    x = choice_inputs(vocab=config.vocab_size)
    logits = model.predict(x, verbose=0)
    assert logits.shape == (3, 4)
    kernel, bias = model.choice_scorer.get_weights()
    for c in range(4):
        pooled = model.backbone.predict({k: v[:, c] for k, v in x.items()},
                                        verbose=0)["pooled_output"]
        np.testing.assert_allclose(logits[:, c], (pooled @ kernel + bias)[:, 0],
                                   rtol=1e-4, atol=1e-5)


def test_feature_extractor_concatenates_layers_and_stays_frozen(config):
    backbone = BertBackbone(config)
    extractor = BertFeatureExtractor(backbone, layers=(-2, -1))
    x = make_inputs(2, 6, config.vocab_size)
    features = extractor.predict(x, verbose=0)
    assert features.shape == (2, 6, 2 * config.hidden_size) == (2, 6, extractor.feature_size)
    reference = BertBackbone(config, output_hidden_states=True)
    reference.set_weights(backbone.get_weights())
    hidden = reference.predict(x, verbose=0)["hidden_states"]
    np.testing.assert_allclose(features, np.concatenate(hidden[-2:], -1), rtol=1e-5, atol=1e-5)
    assert extractor.trainable_weights == []
    extractor.trainable = True  # e.g. an enclosing model unfreezing everything
    assert extractor.trainable_weights == []
    # no dropout inside BERT even when the enclosing model trains
    np.testing.assert_allclose(extractor(x, training=True), features, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_save_and_load_each_model(config, tmp_path):
    x = make_inputs(3, 8, config.vocab_size)
    roundtrip(BertClassifier(BertBackbone(config), num_classes=2), tmp_path, x)
    roundtrip(BertClassifier(BertBackbone(config), num_classes=1), tmp_path, x)
    roundtrip(BertMultipleChoice(BertBackbone(config), num_choices=4), tmp_path,
              choice_inputs(vocab=config.vocab_size))
    roundtrip(BertFeatureExtractor(BertBackbone(config), layers=(-1, 0), combine="mean"),
              tmp_path, x)
    head = BertFeatureClassifier(BertBackbone(config), num_classes=2, layers=(-2, -1))
    loaded = roundtrip(head, tmp_path, x)
    assert len(loaded.trainable_weights) == len(head.trainable_weights) > 0


@pytest.fixture
def one_block(config):
    """For the learning tests: one block learns these toys as well, and traces in half the
    time."""
    import dataclasses

    return dataclasses.replace(config, num_layers=1)


def _fit_losses(model, examples, kind, epochs=14):
    """Per-epoch losses; one repeated pipeline, so no epoch pays for restarting it. (One block,
    seeds 0-2: epoch loss / first epoch's is 0.59-0.96 at the 9th epoch, 0.09-0.32 at the
    13th; the feature classifier's <= 0.16 at the 7th.)"""
    data = make_dataset(examples, preprocessor(12), batch_size=8, kind=kind).cache()
    return model.fit(data.repeat(), steps_per_epoch=int(data.cardinality()), epochs=epochs,
                     verbose=0, shuffle=False).history["loss"]


EXAMPLES = [("good film", 1), ("very good movie", 1), ("fine", 1), ("good", 1),
            ("bad film", 0), ("very dull movie", 0), ("dull", 0), ("bad", 0)] * 2


@pytest.mark.slow
def test_short_fit_reduces_loss(one_block):
    model = BertClassifier(BertBackbone(one_block), num_classes=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    losses = _fit_losses(model, EXAMPLES, "classification")
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.slow
def test_multiple_choice_fit_reduces_loss(one_block):
    examples = [(("what is it ?", ("good", "bad", "dull", "fine")), 0),
                (("what was it ?", ("bad", "dull", "good", "no")), 2),
                (("who is it ?", ("dull", "good", "no", "yes")), 1)] * 3
    model = BertMultipleChoice(BertBackbone(one_block), num_choices=4)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    losses = _fit_losses(model, examples, "multiple_choice")
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.slow
def test_feature_classifier_trains_only_the_head(one_block):
    model = BertFeatureClassifier(BertBackbone(one_block), 2, layers=(-2, -1), lstm_units=16)
    extractor = model.feature_extractor
    frozen = [w.copy() for w in extractor.get_weights()]
    model.compile(keras.optimizers.Adam(1e-2))
    losses = _fit_losses(model, EXAMPLES, "classification", epochs=8)
    assert losses[-1] < 0.5 * losses[0]
    for before, after in zip(frozen, extractor.get_weights()):
        np.testing.assert_array_equal(before, after)


@pytest.mark.slow
def test_loaded_classifier_is_compiled_and_resumes_training_exactly(config, tmp_path):
    """A saved task model comes back compiled, with its optimizer's moments and step count:
    one more step on the loaded copy equals one more step on the original."""
    import dataclasses
    import warnings

    from kbert.training.optimizer import make_optimizer

    x, y = make_inputs(4, 10, config.vocab_size), np.array([0, 1, 2, 1])
    config = dataclasses.replace(config, hidden_dropout=0.0, attention_dropout=0.0)
    model = BertClassifier(BertBackbone(config), num_classes=3, dropout=0.0)
    model.compile(optimizer=make_optimizer(1e-3, total_steps=10, model=model))
    for _ in range(2):
        model.train_on_batch(x, y)
    model.save(tmp_path / "model.keras")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*compile.*")
        loaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    assert loaded.compiled and int(loaded.optimizer.iterations) == 2
    assert [m.name for m in loaded.metrics] == [m.name for m in model.metrics]
    model.train_on_batch(x, y)
    loaded.train_on_batch(x, y)
    for ours, theirs in zip(model.weights, loaded.weights):
        np.testing.assert_allclose(theirs.numpy(), ours.numpy(), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_a_frozen_backbone_stays_frozen_when_built_again(config, tmp_path):
    """`trainable=False` given to a constructor, as `load_model` gives it, freezes every
    layer, as the `trainable` setter does: Keras' functional constructor set the flag before
    it tracked the layers, so a frozen backbone came back with all its weights training (and
    the saved optimizer, sized for the head alone, was dropped)."""
    from tests.test_cli_processes import python

    assert len(BertClassifier(BertBackbone(config, trainable=False), 3).trainable_weights) == 2
    model = BertClassifier(BertBackbone(config), num_classes=3)
    model.backbone.trainable = False
    model.compile(optimizer="adam")
    x, y = make_inputs(4, 10, config.vocab_size), np.array([0, 1, 2, 1])
    model.train_on_batch(x, y)
    model.save(tmp_path / "model.keras")
    np.savez(tmp_path / "batch.npz", y=y, **x)
    loaded = python("""
import json, sys, warnings
import keras, numpy as np
import kbert
warnings.simplefilter("error")  # Keras warns when it drops a saved optimizer
model = keras.saving.load_model(sys.argv[1])
data = dict(np.load(sys.argv[2]))
y = data.pop("y")
before = [w.numpy().copy() for w in model.backbone.weights]
model.train_on_batch(data, y)
print(json.dumps({"trainable": len(model.trainable_weights),
                  "changed": sum(not np.array_equal(a, w.numpy())
                                 for a, w in zip(before, model.backbone.weights))}))
""", tmp_path / "model.keras", tmp_path / "batch.npz")
    assert loaded == {"trainable": 2, "changed": 0}


@pytest.mark.slow
def test_fit_leaves_a_datasets_order_to_the_dataset(one_block, monkeypatch):
    """Keras ignores `shuffle` for a dataset and warns on each `fit`; kbert's default leaves it
    out there and shuffles arrays as Keras does."""
    import warnings

    import tensorflow as tf

    model = BertClassifier(BertBackbone(one_block), num_classes=2)
    model.compile(optimizer="adam")
    x, y = make_inputs(4, 8, len(VOCAB), seed=0), np.array([0, 1, 1, 0])
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, verbose=0)
    assert not [w for w in caught if "shuffle" in str(w.message)]
    with pytest.warns(UserWarning, match="`shuffle=True` was passed, but will be ignored"):
        model.fit(dataset, shuffle=True, verbose=0)  # asked for: Keras says what it does

    seen, keras_fit = [], keras.Model.fit
    monkeypatch.setattr(keras.Model, "fit",
                        lambda *a, **kw: seen.append(kw.get("shuffle")) or keras_fit(*a, **kw))
    model.fit(x, y, verbose=0)
    model.fit(dataset, verbose=0)
    assert seen == [True, False]


def test_counts_take_numpy_integers_and_refuse_what_is_no_count(config):
    """`num_classes=np.int64(3)` (a count read from a dataset) was refused as no integer; a
    feature classifier of one class (a loss of 0 whatever it learns) was built."""
    backbone = BertBackbone(config)
    model = BertClassifier(backbone, num_classes=np.int64(3))
    assert type(model.num_classes) is int and model.get_config()["num_classes"] == 3
    assert BertMultipleChoice(backbone, num_choices=np.int32(4)).num_choices == 4
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2, got 1"):
        BertFeatureClassifier(backbone, num_classes=1, layers=(-1,))
    with pytest.raises(ValueError, match=r"positive integer \(1 = regression\), got True"):
        BertClassifier(backbone, num_classes=True)
    with pytest.raises(ValueError, match="num_choices must be an integer >= 2, got 2.0"):
        BertMultipleChoice(backbone, num_choices=2.0)
