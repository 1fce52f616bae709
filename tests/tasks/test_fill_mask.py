"""Filling blanks with a masked LM (`kbert.tasks.fill_mask`, `BertFillMaskPreprocessor`) against
transformers' own fill-mask pipeline on the same checkpoint, and the export of one
(`kbert export` of a BertForMaskedLM, loaded in a new process)."""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import kbert
from kbert.config_checks import RowError
from kbert.tasks.fill_mask import fill_mask, open_masked_lm
from kbert.text.fill_mask_preprocessor import BertFillMaskPreprocessor

TEXTS = ["Paris is the [MASK] of France.", "The [MASK] sat on the [MASK] all day.",
         "They play[MASK] games.", "[MASK][MASK] twice"]


@pytest.fixture(scope="module")
def masked_lm_dir(minilm_dir, tmp_path_factory):
    """`make(architecture)`: a small transformers model (a masked LM) on MiniLM's vocabulary,
    saved as a user would download it. Weights drawn at std 0.5 rather than BERT's 0.02, so
    that a blank's answer depends on its context (at 0.02 it barely does, and a packing error
    could pass)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))

    def make(architecture):
        path = tmp_path_factory.getbasetemp() / f"fill-{architecture}"
        if not path.exists():
            torch.manual_seed(0)
            config = transformers.BertConfig(
                vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                initializer_range=0.5)
            getattr(transformers, architecture)(config).eval().save_pretrained(str(path))
            tokenizer.save_pretrained(str(path))
        return path

    return make


def pipeline(path, top_k):
    model = transformers.BertForMaskedLM.from_pretrained(str(path)).eval()
    return transformers.pipeline("fill-mask", model=model, tokenizer=str(path), top_k=top_k)


def assert_same_answer(answer, expected):
    """The same pieces and filled text, the same scores up to float summation order (a batch
    cut to another length sums in another order)."""
    assert answer["filled"] == expected["filled"]
    for blank, other in zip(answer["blanks"], expected["blanks"], strict=True):
        assert [c["id"] for c in blank] == [c["id"] for c in other]
        np.testing.assert_allclose([c["score"] for c in blank], [c["score"] for c in other],
                                   atol=1e-6)


def as_blanks(answer):
    """transformers' answer for one text as a list per blank (one blank: a flat list)."""
    return answer if isinstance(answer[0], list) else [answer]


@pytest.mark.parametrize("architecture", ["BertForMaskedLM", "BertForPreTraining"])
def test_blanks_are_filled_as_transformers_fill_mask_pipeline(masked_lm_dir, architecture):
    path = masked_lm_dir(architecture)
    model = open_masked_lm(path)
    reference = pipeline(path, top_k=4)
    ours = kbert.fill_mask(model, TEXTS, top_k=4, batch_size=3)  # two batches
    for text, answer in zip(TEXTS, ours):
        expected = as_blanks(reference(text))
        assert len(answer["blanks"]) == len(expected) == text.count("[MASK]")
        for blank, hf in zip(answer["blanks"], expected):
            assert [c["id"] for c in blank] == [c["token"] for c in hf], text
            np.testing.assert_allclose([c["score"] for c in blank], [c["score"] for c in hf],
                                       atol=1e-5)
            assert [c["token"] for c in blank] == reference.tokenizer.convert_ids_to_tokens(
                [c["token"] for c in hf])
        words = [b[0]["token"].removeprefix("##") for b in answer["blanks"]]
        assert answer["filled"] == "".join(
            p + w for p, w in zip(text.split("[MASK]"), words + [""]))
    # The answer depends on the context: the same blank elsewhere is scored otherwise.
    assert ours[0]["blanks"][0] != fill_mask(model, "London is the [MASK] of France.")["blanks"][0]
    assert_same_answer(fill_mask(model, TEXTS[0], top_k=4), ours[0])  # a string, an answer


def test_typed_special_tokens_stay_text(masked_lm_dir, minilm_dir):
    """"[SEP]" typed in the text is the three pieces "[", "sep", "]" (transformers' tokenizer
    makes it the separator); only the marker makes a blank."""
    path = masked_lm_dir("BertForMaskedLM")
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
    preprocessor = BertFillMaskPreprocessor(kbert.BertTokenizer.from_pretrained(minilm_dir), 16)
    packed = preprocessor(["x [SEP] y [CLS] [MASK]"])
    expected = hf_tokenizer("x [ SEP ] y [ CLS ] [MASK]")["input_ids"]
    np.testing.assert_array_equal(packed["token_ids"][0, :len(expected)], expected)
    assert packed["masked_positions"].numpy().tolist() == [[len(expected) - 2]]
    answer = fill_mask(open_masked_lm(path), "x [SEP] y [CLS] [MASK]", top_k=3)
    hf = pipeline(path, top_k=3)("x [ SEP ] y [ CLS ] [MASK]")
    assert [c["id"] for c in answer["blanks"][0]] == [c["token"] for c in hf]


def test_preprocessor_packs_as_transformers_tokenizer(masked_lm_dir, minilm_dir):
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(masked_lm_dir(
        "BertForMaskedLM")))
    tokenizer = kbert.BertTokenizer.from_pretrained(minilm_dir)
    preprocessor = BertFillMaskPreprocessor(tokenizer, 12)
    texts = TEXTS + ["No blank at all.", "A long text whose blank [MASK] comes early, then "
                                         "goes on for many more words than fit."]
    packed = {k: v.numpy() for k, v in preprocessor(tf.constant(texts)).items()}
    expected = hf_tokenizer(texts, padding="max_length", truncation=True, max_length=12)
    np.testing.assert_array_equal(packed["token_ids"], expected["input_ids"])
    np.testing.assert_array_equal(packed["padding_mask"], expected["attention_mask"])
    assert not packed["segment_ids"].any()
    for row, ids in zip(packed["masked_positions"], expected["input_ids"]):
        blanks = [i for i, t in enumerate(ids) if t == tokenizer.mask_token_id]
        assert row.tolist() == blanks + [0] * (len(row) - len(blanks))
    # Another marker gives the same inputs; the config carries it, and Keras rebuilds it.
    other = BertFillMaskPreprocessor.from_config(
        {**preprocessor.get_config(), "marker": "___"})
    other = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(other))
    again = other([t.replace("[MASK]", "___") for t in texts])
    np.testing.assert_array_equal(again["token_ids"], packed["token_ids"])
    assert preprocessor(tf.constant(TEXTS[0]))["token_ids"].shape == (12,)
    with pytest.raises(TypeError, match="BertFillMaskPreprocessor expects text as strings"):
        preprocessor(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="expects text of shape \\[batch\\]"):
        preprocessor(tf.constant([["a [MASK]", "b [MASK]"]]))


@pytest.mark.slow
def test_a_google_checkpoint_of_the_same_weights_fills_alike(masked_lm_dir, tmp_path):
    """The masked LM written in Google's TF1 layout (cls/predictions/*, as its release holds)
    opens with its head and answers as the Hugging Face directory it came from."""
    from kbert.convert import save_google

    model = open_masked_lm(masked_lm_dir("BertForMaskedLM"))
    save_google(model, tmp_path / "google", tokenizer=model.preprocessor.tokenizer)
    for ours, google in zip(fill_mask(model, TEXTS),
                            fill_mask(open_masked_lm(tmp_path / "google"), TEXTS)):
        assert_same_answer(google, ours)


@pytest.mark.slow
def test_commands_that_do_not_apply_to_a_masked_lm_say_so(masked_lm_dir, tmp_path, capsys):
    """Nothing to score, no classifier to serve, no threshold: one line each, status 2."""
    from kbert_cli import main

    path = str(masked_lm_dir("BertForMaskedLM"))
    classifier = str(masked_lm_dir("BertForSequenceClassification"))
    capsys.readouterr()  # what transformers printed saving them
    for command, message in (
            (["evaluate", path, "--task", "qnli"], "is a pre-trained masked LM"),
            (["export", path, str(tmp_path / "no"), "--task", "classifier"],
             "exports as fill_mask (or as backbone: its encoder), not as classifier"),
            (["predict", path, "--text", "a [MASK]", "--null-threshold", "1"],
             "--null-threshold is SQuAD v2.0's"),
            (["predict", classifier, "--text", "a", "--top-k", "3"],
             "--top-k is for a masked LM's blanks")):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "no").exists()


@pytest.mark.slow
def test_what_cannot_be_filled_is_refused_by_name(masked_lm_dir, minilm_dir):
    model = open_masked_lm(masked_lm_dir("BertForMaskedLM"))
    with pytest.raises(ValueError, match="No blank \\(\\[MASK\\]\\) to fill in 'No blank.'"):
        fill_mask(model, ["a [MASK]", "No blank."])
    with pytest.raises(ValueError, match=re.escape(
            "A blank ([MASK]) in the text is past the sequence length 64: it falls after the "
            "first 62 tokens")):
        fill_mask(model, "word " * 70 + "[MASK]")
    with pytest.raises(RowError, match=re.escape("A blank ([MASK]) in row 1 is past")):
        fill_mask(model, ["a [MASK]", "word " * 70 + "[MASK]"])
    with pytest.raises(ValueError, match="top_k must be at least 1"):
        fill_mask(model, "a [MASK]", top_k=0)
    with pytest.raises(ValueError, match="marker must be a non-blank string"):
        fill_mask(model, "a [MASK]", marker=" ")
    with pytest.raises(ValueError, match="holds an encoder without a fine-tuned head or a "
                                         "masked-LM head"):
        open_masked_lm(minilm_dir)
    classifier = kbert.BertClassifier.from_pretrained(minilm_dir, num_classes=2)
    with pytest.raises(TypeError, match="takes a BertPretrainer"):
        fill_mask(classifier, "a [MASK]")
    bare = kbert.BertPretrainer(model.backbone, use_nsp=False)  # no preprocessor
    bare.mlm_head.set_weights(model.mlm_head.get_weights())
    with pytest.raises(ValueError, match="holds no preprocessor: pass its tokenizer"):
        fill_mask(bare, "a [MASK]")
    assert_same_answer(fill_mask(bare, "a [MASK]", tokenizer=model.preprocessor.tokenizer),
                       fill_mask(model, "a [MASK]"))
    causal = kbert.BertPretrainer(kbert.BertBackbone(model.backbone.config, causal=True),
                                  use_nsp=False, preprocessor=model.preprocessor)
    with pytest.raises(ValueError, match="left-to-right"):
        fill_mask(causal, "a [MASK]")


@pytest.mark.slow
def test_predict_and_export_fill_blanks_in_new_processes(masked_lm_dir, tmp_path, capsys):
    """`kbert predict CHECKPOINT --text ... --top-k` and `kbert export` in new processes, the
    export served as TF Serving loads it (tests/export/serving_client.py: a new process
    without kbert or Keras, a session-based gRPC PredictionService): the pipeline's answers.
    The `--input` file form and `--task backbone` run through `kbert_cli.main` in-process (both
    flags run in new processes in tests/test_cli_processes.py and test_checkpoint_tasks.py)."""
    from kbert_cli import main
    from tests.test_cli_processes import KBERT, run_together, serve_in_emulator

    path = masked_lm_dir("BertForPreTraining")
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    (single, _), _ = run_together(
        KBERT + ["predict", path, "--text", TEXTS[1], "--top-k", "3"],
        KBERT + ["export", path, tmp_path / "served", "--top-k", "3"])
    capsys.readouterr()
    assert main(["predict", str(path), "--input", str(requests), "--top-k", "3"]) == 0
    many = capsys.readouterr().out
    assert main(["export", str(path), str(tmp_path / "encoder"), "--task", "backbone"]) == 0
    reference = pipeline(path, top_k=3)
    single = json.loads(single)
    assert [[c["id"] for c in blank] for blank in single["blanks"]] == [
        [c["token"] for c in blank] for blank in as_blanks(reference(TEXTS[1]))]
    answers = [json.loads(line) for line in many.splitlines()]
    assert len(answers) == len(TEXTS)
    assert_same_answer(answers[1], single)

    served = serve_in_emulator(tmp_path, tmp_path / "served" / "1", {"text": TEXTS})
    assert served["filled"] == [a["filled"] for a in answers]
    for i, answer in enumerate(answers):
        count = len(answer["blanks"])
        assert served["blank_count"][i] == count
        assert served["token_id"][i][:count] == [[c["id"] for c in b] for b in answer["blanks"]]
        assert served["token"][i][:count] == [[c["token"] for c in b] for b in answer["blanks"]]
        np.testing.assert_allclose(served["score"][i][:count],
                                   [[c["score"] for c in b] for b in answer["blanks"]],
                                   atol=1e-5)
        assert all(t == [-1] * 3 for t in served["token_id"][i][count:])
    # Token ids with [MASK] ids at the blanks (serve_token_ids): the same pieces. A megabyte
    # of text costs what its first 126 tokens do, and a blank there is filled.
    export = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures
    ids = tf.constant([reference.tokenizer(TEXTS[1])["input_ids"]], tf.int32)
    by_ids = export["serve_token_ids"](token_ids=ids, segment_ids=tf.zeros_like(ids),
                                       padding_mask=tf.ones_like(ids))
    assert by_ids["token_id"].numpy()[0].tolist() == served["token_id"][1]
    huge = export["serving_default"](text=tf.constant(["[MASK] " + "word " * 200_000]))
    assert huge["blank_count"].numpy().tolist() == [1]
    # --task backbone serves the checkpoint's encoder: raw text in, its embeddings out.
    encoder = tf.saved_model.load(str(tmp_path / "encoder" / "1")).signatures
    embedded = encoder["serving_default"](text=tf.constant(TEXTS[:2]))
    model = open_masked_lm(path)
    packed = kbert.BertPreprocessor(model.preprocessor.tokenizer,
                                    model.preprocessor.sequence_length)(TEXTS[:2])
    np.testing.assert_allclose(embedded["pooled_output"],
                               model.backbone(packed)["pooled_output"], atol=1e-5)
    # The warm-up requests (which the emulator replayed) hold blanks, so they run the head.
    from tensorflow_serving.apis import prediction_log_pb2

    warmup = tmp_path / "served" / "1" / "assets.extra" / "tf_serving_warmup_requests"
    logs = [prediction_log_pb2.PredictionLog.FromString(r)
            for r in tf.data.TFRecordDataset(str(warmup)).as_numpy_iterator()]
    texts = tf.make_ndarray(logs[1].predict_log.request.inputs["text"])
    assert all(b"[MASK]" in text for text in texts) and len(texts) == 4
