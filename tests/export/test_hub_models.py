"""`kbert convert --to tf_hub` (kbert.export.hub_models): TF Hub's BERT preprocessor and encoder
SavedModels, used in a new process as code written for TF Hub uses them
(tests/export/hub_consumer.py: tensorflow_hub and tf_keras, no kbert). The references are
Hugging Face's tokenizer with Google's truncation of pairs (encoder inputs) and its PyTorch
`BertModel` on the same MiniLM weights (encoder outputs)."""

import json
import os
import sys

import numpy as np
import pytest

from tests.test_cli_processes import KBERT, run
from tests.text.reference_tokenizer import truncate_pair

HERE = os.path.dirname(__file__)
LENGTH = 24  # the export's default seq_length: long texts below are cut
PAIR_LENGTH = 20
TEXTS = ["The quick brown fox jumped over the lazy dog.", "Good day.",
         "Déjà vu: the CAFÉ's crème brûlée was superb, wasn't it?",
         "A film so long that it needs cutting: " + "very " * 30 + "long.",
         "unaffable pseudo-intellectuals"]
SEP_AS_TEXT = "Good day [SEP] ok."
PAIRS = [["The quick brown fox jumped over the lazy dog.", "The dog was lazy."],
         ["Good day.", "Axe handle! " * 12],
         ["one two three four five six seven eight nine ten eleven twelve",
          "one two three four five six seven eight nine ten eleven twelve"],
         ["a b c d e f g h i j k", "x y z"]]


@pytest.fixture(scope="module")
def consumed(tmp_path_factory):
    """(export dir, what hub_consumer.py read back from it)."""
    tmp = tmp_path_factory.mktemp("tf_hub")
    out, _ = run(KBERT + ["convert", "minilm_l6_h384_uncased", tmp / "minilm", "--to",
                          "tf_hub", "--sequence-length", LENGTH])
    assert "Wrote TF Hub preprocessor and encoder" in out
    job = tmp / "job.json"
    job.write_text(json.dumps({"texts": TEXTS + [SEP_AS_TEXT], "pairs": PAIRS,
                               "pair_length": PAIR_LENGTH}))
    run([sys.executable, os.path.join(HERE, "hub_consumer.py"), tmp / "minilm", job,
         tmp / "out.npz"])
    return tmp / "minilm", dict(np.load(tmp / "out.npz"))


@pytest.fixture(scope="module")
def hugging_face(minilm_dir):
    transformers = pytest.importorskip("transformers")
    return (transformers.AutoTokenizer.from_pretrained(str(minilm_dir)),
            transformers.BertModel.from_pretrained(str(minilm_dir)).eval())


def hf_inputs(tokenizer, texts, length):
    encoded = tokenizer(texts, max_length=length, truncation=True, padding="max_length",
                        return_tensors="np")
    return {"input_word_ids": encoded["input_ids"], "input_type_ids": encoded["token_type_ids"],
            "input_mask": encoded["attention_mask"]}


def google_pairs(tokenizer, pairs, length):
    """Hugging Face's word pieces, cut by Google's `_truncate_seq_pair` (Hugging Face's own
    longest-first gives the odd token to the second text on a tie; Google, and kbert, to the
    first) and packed as run_classifier.py's `convert_single_example` packs them."""
    rows = {"input_word_ids": [], "input_type_ids": [], "input_mask": []}
    for a, b in pairs:
        a, b = truncate_pair(tokenizer(a, add_special_tokens=False)["input_ids"],
                             tokenizer(b, add_special_tokens=False)["input_ids"], length - 3)
        ids = [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id]
        pad = length - len(ids)
        rows["input_word_ids"].append(ids + [tokenizer.pad_token_id] * pad)
        rows["input_type_ids"].append([0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * pad)
        rows["input_mask"].append([1] * len(ids) + [0] * pad)
    return {k: np.asarray(v) for k, v in rows.items()}


@pytest.mark.slow
def test_encoder_inputs_are_hugging_faces(consumed, hugging_face):
    _, got = consumed
    tokenizer, _ = hugging_face
    singles = hf_inputs(tokenizer, TEXTS, LENGTH)
    pairs = google_pairs(tokenizer, PAIRS, PAIR_LENGTH)
    for key in singles:
        np.testing.assert_array_equal(got[f"single/{key}"][:len(TEXTS)], singles[key], key)
        np.testing.assert_array_equal(got[f"pair/{key}"], pairs[key], key)
        np.testing.assert_array_equal(got[f"flat/{key}"], pairs[key], key)
    assert got["single/input_mask"][3].sum() == LENGTH  # cut to the length
    # `tokenize` gives TF Hub's [batch, (words), (tokens)] int32: Hugging Face's pieces
    # grouped by the word each came from (its fast tokenizer's `word_ids`).
    assert got["words_shape"].tolist() == [3, 2, 1]
    words = json.loads(str(got["words"]))
    # (Hugging Face reads a typed "[SEP]" as its separator: spaced out, it is the text kbert
    # reads.)
    for text, grouped in zip(TEXTS + [SEP_AS_TEXT.replace("[SEP]", "[ SEP ]")], words):
        encoding = tokenizer(text, add_special_tokens=False)
        expected = {}
        for token, word in zip(encoding["input_ids"], encoding.word_ids()):
            expected.setdefault(word, []).append(token)
        assert grouped == list(expected.values()), text
    # "[SEP]" typed by a user is text: the only separator is the one packing adds.
    sep = tokenizer.sep_token_id
    assert list(got["single/input_word_ids"][-1]).count(sep) == 1


@pytest.mark.slow
def test_encoder_outputs_are_hugging_faces(consumed, hugging_face):
    import torch

    _, got = consumed
    _, model = hugging_face
    ids = {k: torch.tensor(got[f"single/{k}"][:len(TEXTS)], dtype=torch.long)
           for k in ("input_word_ids", "input_type_ids", "input_mask")}
    with torch.no_grad():
        reference = model(input_ids=ids["input_word_ids"], token_type_ids=ids["input_type_ids"],
                          attention_mask=ids["input_mask"], output_hidden_states=True)
    n = len(TEXTS)
    np.testing.assert_allclose(got["sequence_output"][:n], reference.last_hidden_state,
                               atol=2e-4)
    np.testing.assert_allclose(got["pooled_output"][:n], reference.pooler_output, atol=2e-4)
    np.testing.assert_array_equal(got["default"], got["pooled_output"])
    np.testing.assert_allclose(got["keras3_pooled"], got["pooled_output"], atol=1e-6)
    layers = np.stack([h.numpy() for h in reference.hidden_states[1:]])
    np.testing.assert_allclose(got["encoder_outputs"][:, :n], layers, atol=2e-4)
    # training=True runs dropout (the checkpoint's 0.1), which inference does not.
    assert np.abs(got["pooled_training"] - got["pooled_output"]).max() > 1e-3


@pytest.mark.slow
def test_the_tutorials_classifier_fine_tunes_the_encoder(consumed):
    """`hub.KerasLayer(encoder, trainable=True)` trains every weight of the backbone."""
    import kbert

    _, got = consumed
    backbone = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")
    variables, trainable, losses = got["variables"]
    assert trainable == got["encoder_trainable"] == len(backbone.trainable_weights)
    assert variables >= trainable and losses == 0
    assert np.isfinite(got["fit_loss"]).all()
    assert (got["moved"] > 0).mean() > 0.9  # Adam moves each weight given a gradient


def test_an_export_is_whole_or_refused(tmp_path):
    """A directory of other files is not replaced without overwrite; a causal backbone (the
    left-to-right ablation) has no TF Hub form; a default seq_length beyond the encoder's
    positions is refused (`kbert convert --to tf_hub --sequence-length 1000` wrote models that
    failed on the first long text)."""
    import kbert
    from kbert.export.hub_models import export_hub_models
    from tests.tasks.helpers import VOCAB, preprocessor

    config = kbert.BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_layers=1, num_heads=2,
                              intermediate_size=32, max_position_embeddings=32)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="holds other files"):
        export_hub_models(kbert.BertBackbone(config), preprocessor(), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    with pytest.raises(ValueError, match="causal backbone"):
        export_hub_models(kbert.BertBackbone(config, causal=True), preprocessor(),
                          tmp_path / "causal")
    assert not (tmp_path / "causal").exists()
    with pytest.raises(ValueError, match="sequence_length=33 exceeds the model's 32 positions"):
        export_hub_models(kbert.BertBackbone(config), preprocessor(33), tmp_path / "long")
    assert not (tmp_path / "long").exists()
