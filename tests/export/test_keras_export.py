"""`model.export(path)`, Keras' own export, on a kbert task with a preprocessor: the raw-text
SavedModel of `kbert.export_saved_model`, written into `path` itself."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from kbert.config import BertConfig
from kbert.export import export_saved_model
from kbert.models.backbone import BertBackbone
from kbert.models.classifier import BertClassifier
from kbert.text import BertPreprocessor, BertTokenizer

from tests.export.test_export import TEXTS, TINY_VOCAB, _env

# Loads SavedModels in a process without kbert: each one's signatures (name -> input names),
# and the serving_default logits of the first on the texts.
_SERVE = """
import json, sys
sys.modules["kbert"] = None
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer's ops)
texts, paths = json.loads(sys.argv[1]), sys.argv[2:]
loaded = [tf.saved_model.load(path) for path in paths]
signatures = [{name: sorted(fn.structured_input_signature[1]) for name, fn in
               served.signatures.items()} for served in loaded]
logits = loaded[0].signatures["serving_default"](text=tf.constant(texts))["logits"]
print(json.dumps({"signatures": signatures, "logits": logits.numpy().tolist()}))
"""


@pytest.fixture(scope="module")
def classifier():
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_layers=2, num_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary=TINY_VOCAB, lowercase=True),
                                    sequence_length=16)
    return BertClassifier(BertBackbone(config), num_classes=3, preprocessor=preprocessor)


@pytest.mark.slow
def test_model_export_writes_the_raw_text_saved_model(classifier, tmp_path, capfd):
    path = tmp_path / "served"
    path.mkdir()  # an empty folder is taken, as a new one
    classifier.export(path)
    printed = capfd.readouterr().out
    assert "Captures" not in printed and len(printed.strip().splitlines()) == 1, printed
    assert printed.startswith(f"Saved a SavedModel of raw text at '{path}': serving_default(text)")
    assert (path / "saved_model.pb").is_file() and (path / "assets" / "vocab.txt").is_file()
    assert sorted(os.listdir(tmp_path)) == ["served"]  # no staging or scratch left beside it
    versioned = export_saved_model(classifier, tmp_path / "versions", warmup_texts=[])

    done = subprocess.run([sys.executable, "-c", _SERVE, json.dumps(TEXTS), str(path),
                           str(versioned)], env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    served = json.loads(done.stdout.strip().splitlines()[-1])
    exported, reference = served["signatures"]
    assert exported == reference
    assert exported["serving_default"] == ["text"]
    np.testing.assert_allclose(served["logits"], classifier.predict(TEXTS, verbose=0),
                               atol=1e-5)


@pytest.mark.slow
def test_model_export_loses_nothing(classifier, tmp_path):
    path = tmp_path / "served"
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="exists and is not an empty folder"):
        classifier.export(path)
    assert os.listdir(path) == ["notes.txt"] and sorted(os.listdir(tmp_path)) == ["served"]
    (tmp_path / "file").write_text("mine")
    with pytest.raises(FileExistsError, match="is a file"):
        classifier.export(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.slow
def test_without_a_preprocessor_keras_exports_the_ids_graph(classifier, tmp_path):
    import tensorflow as tf

    model = BertClassifier(classifier.backbone, num_classes=3)
    model.export(tmp_path / "ids", verbose=False)
    serve = tf.saved_model.load(str(tmp_path / "ids")).signatures["serving_default"]
    assert sorted(serve.structured_input_signature[1]) == [
        "padding_mask", "segment_ids", "token_ids"]
