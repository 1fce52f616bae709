"""`compile()` without speed flags: kbert's XLA choice (`kbert.models.xla`). On TensorFlow a
task model compiles fixed-length inputs with XLA and runs batches whose length varies (raw text)
trimmed without it; asked for XLA, it pads those batches to a few lengths instead."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer
from kbert.models.xla import XLA_PAD_MULTIPLE, default_jit_compile, has_fixed_length

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


def test_xla_for_fixed_lengths_trimmed_path_for_raw_text(classifier):
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
