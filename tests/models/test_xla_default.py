"""`compile()` without speed flags: kbert's XLA choice (`kbert.models.xla`) reaches the task
models and the backbone, and their raw-text batches are padded to a few lengths under it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer
from kbert.models.xla import XLA_PAD_MULTIPLE, default_jit_compile, pad_multiple

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film", "very"]


def test_the_rule_on_tensorflow():
    assert default_jit_compile() is True and default_jit_compile("auto") is True
    assert default_jit_compile(False) is False and default_jit_compile(True) is True
    # On a CPU, bf16 compute runs fastest in oneDNN without XLA.
    assert default_jit_compile(None, "mixed_bfloat16") is False
    assert default_jit_compile(True, "mixed_bfloat16") is True  # asked for: given
    # Keras 3's compiled train step fails under several replicas (keras-team/keras#19005).
    two_cpus = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if len(
        tf.config.list_logical_devices("CPU")) > 1 else None
    if two_cpus is not None:
        with two_cpus.scope():
            assert default_jit_compile() is False


@pytest.fixture
def classifier(tiny_config):
    tokenizer = BertTokenizer(vocabulary=VOCAB + [f"w{i}" for i in range(110)], lowercase=True)
    return BertClassifier(BertBackbone(tiny_config), num_classes=2,
                          preprocessor=BertPreprocessor(tokenizer, sequence_length=48))


def test_compile_without_flags_is_xla_and_pads_raw_text(classifier):
    classifier.compile(optimizer="adam")
    assert classifier.jit_compile is True and pad_multiple(classifier) == XLA_PAD_MULTIPLE
    batches = classifier._text_dataset(["a good film", "very " * 20], batch_size=1)
    lengths = [int(tf.nest.flatten(x)[0].shape[1]) for x in batches]
    assert lengths == [16, 32]  # 5 and 23 tokens, rounded up to multiples of 16
    # The padded path predicts what the unpadded one does.
    texts = ["a good film", "a very bad film", "film"]
    xla = classifier.predict(texts, verbose=0)
    classifier.compile(optimizer="adam", jit_compile=False)
    assert pad_multiple(classifier) == 1
    np.testing.assert_allclose(xla, classifier.predict(texts, verbose=0), atol=1e-5)


def test_the_backbone_and_a_mixed_precision_task_choose_too(tiny_config):
    backbone = BertBackbone(tiny_config)
    backbone.compile()
    assert backbone.jit_compile is True
    half = BertClassifier(BertBackbone(tiny_config, dtype="mixed_bfloat16"), num_classes=2)
    half.compile(optimizer="adam")
    assert half.jit_compile is False
    keras.config.set_dtype_policy("float32")
