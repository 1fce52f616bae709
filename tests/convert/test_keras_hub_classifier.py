"""A fine-tuned `BertClassifier` written as keras-hub's `BertTextClassifier` preset
(`kbert.convert.save_keras_hub`): keras-hub, in a new process without kbert, packs raw text as
Google's tokenizer does and gives kbert's logits."""

import json

import numpy as np
import pytest

import kbert
from kbert.config import ConfigError
from kbert.convert import CheckpointError, save_keras_hub
from kbert.models import BertClassifier, BertTokenClassifier
from tests.convert.test_hf_task_heads import with_random_head
from tests.test_cli_processes import python
from tests.text.reference_tokenizer import ReferenceTokenizer, truncate_pair

LENGTH = 24
LONG = "the film drags on and on through scene after scene of nothing much at all happening"
SINGLES = ["Café Über naïve résumé", "He typed [SEP] and [CLS] here.", "don't stop—now!", LONG]
PAIRS = ([LONG, LONG, "Is it good?", "Où est la gare?"],
         ["Not really.", LONG + " again", LONG, "À gauche."])

KERAS_HUB_CLASSIFY = (
    "import json, sys, keras_hub; "
    "m = keras_hub.models.TextClassifier.from_preset(sys.argv[1]); "
    "singles, pairs = json.loads(sys.argv[2]); pairs = (pairs[0], pairs[1]); "
    "ids = lambda x: [[int(i) for i in r] for r in m.preprocessor(x=x)['token_ids']]; "
    "print(json.dumps([type(m).__name__, ids(singles), ids(pairs), "
    "m.predict(singles, verbose=0).tolist(), m.predict(pairs, verbose=0).tolist()]))")


def classifier(minilm_dir, hidden_act):
    """A 3-class classifier on MiniLM's real vocabulary (a small random encoder)."""
    config = kbert.BertConfig(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=4,
                              intermediate_size=64, max_position_embeddings=64,
                              hidden_act=hidden_act)
    preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer.from_pretrained(minilm_dir),
                                          sequence_length=LENGTH)
    model = BertClassifier(kbert.BertBackbone(config), num_classes=3, dropout=0.2,
                           preprocessor=preprocessor)
    return with_random_head(model, "classifier")


def packed(reference, a, b=None):
    """Google's packing: [CLS] a [SEP] (b [SEP]), the pair cut by `_truncate_seq_pair`."""
    a = reference.encode(a)
    if b is None:
        return [101] + a[:LENGTH - 2] + [102]
    a, b = truncate_pair(a, reference.encode(b), LENGTH - 3)
    return [101] + a + [102] + b + [102]


def test_keras_hub_answers_raw_text_as_the_kbert_classifier(minilm_dir, tmp_path):
    model = classifier(minilm_dir, "gelu_tanh")
    save_keras_hub(model, tmp_path / "preset")
    task, single_ids, pair_ids, single_logits, pair_logits = python(
        KERAS_HUB_CLASSIFY, tmp_path / "preset", json.dumps([SINGLES, list(PAIRS)]))
    assert task == "BertTextClassifier"

    vocabulary = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    reference = ReferenceTokenizer(vocabulary, lowercase=True)
    for row, text in zip(single_ids, SINGLES):  # accents stripped, "[SEP]" typed is text
        assert [i for i in row if i] == packed(reference, text), text
    for row, a, b in zip(pair_ids, *PAIRS):
        assert [i for i in row if i] == packed(reference, a, b), (a, b)

    np.testing.assert_allclose(single_logits, model.predict(SINGLES, verbose=0), atol=1e-5)
    np.testing.assert_allclose(pair_logits, model.predict(PAIRS, verbose=0), atol=1e-5)


def test_what_keras_hub_cannot_hold_is_refused(minilm_dir, tmp_path):
    exact = classifier(minilm_dir, "gelu")
    with pytest.raises(ConfigError, match="allow_approximation"):
        save_keras_hub(exact, tmp_path / "exact")
    tagger = BertTokenClassifier(exact.backbone, num_classes=5)
    with pytest.raises(ValueError, match="BertTextClassifier; a BertTokenClassifier"):
        save_keras_hub(tagger, tmp_path / "tagger")
    assert list(tmp_path.iterdir()) == []


KBERT_CLASSIFY = (
    "import json, sys, kbert; "
    "m = kbert.BertClassifier.from_pretrained(sys.argv[1]); "
    "singles, pairs = json.loads(sys.argv[2]); pairs = (pairs[0], pairs[1]); "
    "print(json.dumps([m.preprocessor.sequence_length, m.predict(singles, verbose=0).tolist(), "
    "m.predict(pairs, verbose=0).tolist()]))")


def test_a_classifier_fine_tuned_in_keras_hub_loads_with_its_head(minilm_dir, tmp_path):
    """keras-hub's own `BertTextClassifier` preset: `BertClassifier.from_pretrained` (a new
    process) takes its head and packing length and answers as keras-hub does."""
    import keras_hub

    vocabulary = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True,
                                               strip_accents=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=4, hidden_dim=32,
        intermediate_dim=64, max_sequence_length=64)
    task = keras_hub.models.BertTextClassifier(
        backbone, num_classes=3, preprocessor=keras_hub.models.BertTextClassifierPreprocessor(
            tokenizer, sequence_length=16))
    rng = np.random.default_rng(2)
    task.get_layer("logits").set_weights([rng.normal(size=(32, 3)).astype("float32"),
                                          rng.normal(size=3).astype("float32")])
    task.save_to_preset(str(tmp_path / "preset"))

    length, singles, pairs = python(KBERT_CLASSIFY, tmp_path / "preset",
                                    json.dumps([SINGLES, list(PAIRS)]))
    assert length == 16  # so LONG is cut where keras-hub cuts it
    np.testing.assert_allclose(singles, task.predict(SINGLES, verbose=0), atol=1e-5)
    np.testing.assert_allclose(pairs, task.predict(PAIRS, verbose=0), atol=1e-5)
    with pytest.raises(ValueError, match="head with num_classes=3, not 2"):
        BertClassifier.from_pretrained(str(tmp_path / "preset"), num_classes=2)

    task_json = tmp_path / "preset" / "task.json"
    saved = json.loads(task_json.read_text())
    saved["config"]["activation"] = "softmax"
    task_json.write_text(json.dumps(saved))
    with pytest.raises(CheckpointError, match="applies 'softmax' to the logits"):
        BertClassifier.from_pretrained(str(tmp_path / "preset"))
    task_json.write_text("{")
    with pytest.raises(CheckpointError, match="cannot read .*task.json"):
        BertClassifier.from_pretrained(str(tmp_path / "preset"))
