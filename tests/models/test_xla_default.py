"""`compile()` without speed flags: kbert's XLA choice (`kbert.models.xla`). On TensorFlow a
task model compiles fixed-length inputs with XLA and runs batches whose length varies (raw text)
trimmed without it; asked for XLA, it pads those batches to a few lengths instead. A call too
short to pay for XLA's compilation runs without it, each step function deciding for itself."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer
from kbert.models import xla
from kbert.models.xla import (XLA_PAD_MULTIPLE, count_batches, default_jit_compile,
                              has_fixed_length, pays_off)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film", "very"]
TEXTS = ["a good film", "very " * 20]  # 5 and 22 tokens with [CLS] and [SEP]


def test_the_rule_on_tensorflow():
    assert default_jit_compile() is True and default_jit_compile("auto") is True
    assert default_jit_compile(False) is False and default_jit_compile(True) is True
    # On a CPU, bf16 compute runs fastest in oneDNN without XLA.
    assert default_jit_compile(None, "mixed_bfloat16") is False
    assert default_jit_compile(True, "mixed_bfloat16") is True  # asked for: given
    # Keras 3's compiled train step fails under several replicas (keras-team/keras#19005).
    if len(tf.config.list_logical_devices("CPU")) > 1:
        with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
            assert default_jit_compile() is False


def test_fixed_length_is_read_from_arrays_and_dataset_specs():
    ids = np.zeros((4, 8), "int32")
    assert has_fixed_length({"token_ids": ids})
    assert has_fixed_length(tf.data.Dataset.from_tensor_slices({"token_ids": ids}).batch(2))
    varying = tf.data.Dataset.from_generator(
        lambda: iter([]), output_signature={"token_ids": tf.TensorSpec([None, None], tf.int32)})
    assert not has_fixed_length(varying)


@pytest.fixture
def classifier(tiny_config):
    tokenizer = BertTokenizer(vocabulary=VOCAB + [f"w{i}" for i in range(110)], lowercase=True)
    return BertClassifier(BertBackbone(tiny_config), num_classes=2,
                          preprocessor=BertPreprocessor(tokenizer, sequence_length=48))


def _lengths(model):
    return [int(tf.nest.flatten(x)[0].shape[1]) for x in model._text_dataset(TEXTS, batch_size=1)]


@pytest.mark.slow
def test_xla_for_fixed_lengths_trimmed_path_for_raw_text(classifier, monkeypatch):
    monkeypatch.setattr(xla, "XLA_PAYS_AFTER", {"train": 0, "predict": 0})  # any call pays
    classifier.compile(optimizer="adam")
    assert classifier.xla_by_shape and classifier.jit_compile is True
    ids = np.full((2, 48), 5, "int32")
    packed = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": 1 + 0 * ids}
    fixed = classifier.predict(packed, verbose=0)
    assert classifier.jit_compile is True
    raw = classifier.predict(TEXTS, verbose=0)
    assert classifier.jit_compile is False and _lengths(classifier) == [5, 22]  # trimmed
    np.testing.assert_allclose(classifier.predict(packed, verbose=0), fixed, atol=1e-5)
    assert classifier.jit_compile is True  # back to XLA for the fixed-length input
    # Asked for XLA, raw text is padded to multiples of 16 (a few shapes) and predicts the same.
    classifier.compile(optimizer="adam", jit_compile=True)
    assert not classifier.xla_by_shape
    assert _lengths(classifier) == [XLA_PAD_MULTIPLE, 2 * XLA_PAD_MULTIPLE]
    np.testing.assert_allclose(classifier.predict(TEXTS, verbose=0), raw, atol=1e-5)
    assert classifier.jit_compile is True


def test_a_saved_model_chooses_again_where_it_is_loaded(classifier, tmp_path):
    classifier.compile(optimizer="adam")
    assert classifier.get_compile_config()["jit_compile"] == "auto"
    classifier.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.xla_by_shape and loaded.jit_compile is True
    classifier.compile(optimizer="adam", jit_compile=False)
    assert classifier.get_compile_config()["jit_compile"] is False


def test_the_backbone_and_a_mixed_precision_task_choose_too(tiny_config):
    backbone = BertBackbone(tiny_config)
    backbone.compile()
    assert backbone.jit_compile is True
    half = BertClassifier(BertBackbone(tiny_config, dtype="mixed_bfloat16"), num_classes=2)
    half.compile(optimizer="adam")
    assert half.jit_compile is False and not half.xla_by_shape


def test_the_break_even_is_steps_times_encoder_parameters():
    ids = np.zeros((70, 8), "int32")
    assert count_batches({"token_ids": ids}) == 3 and count_batches({"token_ids": ids}, 7) == 10
    data = tf.data.Dataset.from_tensor_slices({"token_ids": ids})
    assert count_batches(data.batch(16)) == 5 and count_batches(data.repeat().batch(16)) is None
    assert count_batches(data.filter(lambda x: True).batch(16)) is None  # unknown: long
    # BERT-base's encoder (85.6M weights besides its embeddings) pays after 12 training steps
    # and 1 prediction step, the tiny preset's (413k) after ~2,400 and ~120.
    base, tiny = 85_645_056, 413_056
    assert pays_off("train", 12, base) and not pays_off("train", 11, base)
    assert pays_off("predict", 1, base) and pays_off("test", 1, base)
    assert not pays_off("train", 2400, tiny) and pays_off("train", 2500, tiny)
    assert not pays_off("predict", 120, tiny) and pays_off("predict", 130, tiny)
    assert pays_off("train", None, tiny)  # a dataset of unknown length runs long


@pytest.mark.slow
def test_a_call_too_short_to_pay_runs_without_xla(classifier, monkeypatch):
    classifier.compile(optimizer="adam")
    ids = np.full((4, 48), 5, "int32")
    packed = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": 1 + 0 * ids}
    labels = np.array([0, 1, 0, 1])
    fixed = classifier.predict(packed, verbose=0)  # one step of a two-layer 32-wide encoder
    assert classifier.jit_compile is False and classifier.xla_modes == {"predict": False}
    # Training long enough to pay, evaluating too briefly: fit compiles its training step
    # with XLA and its validation without, epoch after epoch.
    monkeypatch.setattr(xla, "XLA_PAYS_AFTER", {"train": 0, "predict": 1e30})
    history = classifier.fit(packed, labels, batch_size=2, epochs=2, verbose=0,
                             validation_data=(packed, labels))
    assert len(history.history["val_loss"]) == 2
    assert classifier.xla_modes == {"predict": False, "train": True, "test": False}
    assert classifier.train_function is not None  # validation did not rebuild it
    monkeypatch.setattr(xla, "XLA_PAYS_AFTER", {"train": 0, "predict": 0})
    after_fit = classifier.predict(packed, verbose=0)
    assert classifier.xla_modes["predict"] is True
    np.testing.assert_allclose(classifier.predict(packed, verbose=0), after_fit, atol=1e-5)
    assert not np.allclose(after_fit, fixed)  # two epochs moved the weights
