"""Fine-tuned heads in the checkpoints of google-research/bert's fine-tuning scripts
(`kbert.convert.google`): a kbert classifier or span labeler is written with the variables
run_classifier.py / run_squad.py create, and their checkpoints (optimizer slots, several steps)
load back with the head."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.convert import CheckpointError, save_google
from kbert.models import BertClassifier, BertSpanLabeler, BertTokenClassifier
from tests.convert.test_hf_task_heads import CONFIG, random_inputs, with_random_head

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    f"w{i}" for i in range(CONFIG.vocab_size - 5)]


def google_logits(checkpoint, features, weights_name, bias_name):
    """`create_model`'s head in run_classifier.py / run_squad.py, from the checkpoint's own
    variables: `bias_add(matmul(x, output_weights, transpose_b=True), output_bias)`."""
    reader = tf.train.load_checkpoint(str(checkpoint))
    weights, bias = reader.get_tensor(weights_name), reader.get_tensor(bias_name)
    return features @ weights.T + bias


def classifier():
    return with_random_head(BertClassifier(kbert.BertBackbone(CONFIG), 3), "classifier")


def test_a_classifier_is_run_classifiers_checkpoint(tmp_path):
    model = classifier()
    save_google(model, tmp_path, tokenizer=kbert.BertTokenizer(VOCABULARY))
    inputs = random_inputs((4, 12))
    pooled = np.asarray(model.backbone(inputs)["pooled_output"])
    expected = model.predict(inputs, verbose=0)
    np.testing.assert_allclose(google_logits(tmp_path / "bert_model.ckpt", pooled,
                                             "output_weights", "output_bias"), expected,
                               atol=1e-5)
    loaded = BertClassifier.from_pretrained(str(tmp_path))
    assert loaded.num_classes == 3
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), expected, atol=1e-5)


def test_a_span_labeler_is_run_squads_checkpoint(tmp_path):
    model = with_random_head(BertSpanLabeler(kbert.BertBackbone(CONFIG)), "span_logits")
    save_google(model, tmp_path, tokenizer=kbert.BertTokenizer(VOCABULARY))
    inputs = random_inputs((3, 14))
    real = inputs["padding_mask"].astype(bool)  # kbert sets padding to -1e4; Google does not
    tokens = np.asarray(model.backbone(inputs)["sequence_output"])
    logits = google_logits(tmp_path / "bert_model.ckpt", tokens,
                           "cls/squad/output_weights", "cls/squad/output_bias")
    ours = model.predict(inputs, verbose=0)
    for row, key in enumerate(("start_logits", "end_logits")):  # run_squad.py's unstack order
        np.testing.assert_allclose(logits[..., row][real], ours[key][real], atol=1e-5)
    loaded = BertSpanLabeler.from_pretrained(str(tmp_path)).predict(inputs, verbose=0)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(loaded[key][real], ours[key][real], atol=1e-5)


def test_a_training_run_directory_loads_at_its_latest_step(tmp_path):
    """run_classifier.py's --output_dir: model.ckpt-N with Adam slots and global_step, a
    `checkpoint` file naming the newest; bert_config.json and vocab.txt copied in by the user."""
    save_google(classifier(), tmp_path / "release", tokenizer=kbert.BertTokenizer(VOCABULARY))
    reader = tf.train.load_checkpoint(str(tmp_path / "release" / "bert_model.ckpt"))
    variables = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    run = tmp_path / "output_dir"
    run.mkdir()
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(tmp_path / "release" / name, run / name)
    heads = {}
    for step in (5, 10):
        head = np.random.default_rng(step).normal(size=(3, CONFIG.hidden_size))
        state = {**variables, "output_weights": head.astype("float32"),
                 "global_step": np.int64(step)}
        state.update({f"{n}/adam_{m}": np.zeros_like(v) for n, v in variables.items()
                      for m in "mv"})
        names = sorted(state)
        tf.raw_ops.SaveV2(prefix=str(run / f"model.ckpt-{step}"), tensor_names=names,
                          shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(state[n]) for n in names])
        heads[step] = head
    (run / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-10"\n'
                                    'all_model_checkpoint_paths: "model.ckpt-5"\n'
                                    'all_model_checkpoint_paths: "model.ckpt-10"\n')
    loaded = BertClassifier.from_pretrained(str(run))
    np.testing.assert_array_equal(loaded.get_layer("classifier").get_weights()[0],
                                  heads[10].T.astype("float32"))


def test_what_google_has_no_head_for_is_refused(tmp_path):
    tagger = BertTokenClassifier(kbert.BertBackbone(CONFIG), num_classes=5)
    with pytest.raises(ValueError, match="run_classifier.py.*not a BertTokenClassifier"):
        save_google(tagger, tmp_path / "tagger")
    assert not (tmp_path / "tagger").exists()

    save_google(classifier(), tmp_path / "bad", tokenizer=kbert.BertTokenizer(VOCABULARY))
    reader = tf.train.load_checkpoint(str(tmp_path / "bad" / "bert_model.ckpt"))
    state = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    state["output_weights"] = np.zeros((3, CONFIG.hidden_size + 1), "float32")
    names = sorted(state)
    tf.raw_ops.SaveV2(prefix=str(tmp_path / "bad" / "bert_model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(state[n]) for n in names])
    with pytest.raises(CheckpointError, match=r"output_weights is \[3, 33\].*\[num_classes, 32\]"):
        BertClassifier.from_pretrained(str(tmp_path / "bad"))


@pytest.mark.slow
def test_fine_tuned_checkpoints_convert_between_formats_with_their_heads(tmp_path):
    """`kbert convert` of a checkpoint that holds a fine-tuned head (not only a run) writes the
    head in the new format: Google's run_squad.py -> transformers' BertForQuestionAnswering ->
    Google again, answering as the model that was written first; `kbert predict` answers with
    the first checkpoint directly."""
    import transformers
    from tests.convert.test_hf_task_heads import load_in_transformers
    from tests.test_cli_processes import KBERT, run

    model = with_random_head(BertSpanLabeler(kbert.BertBackbone(CONFIG)), "span_logits")
    save_google(model, tmp_path / "squad", tokenizer=kbert.BertTokenizer(VOCABULARY))
    out, _ = run(KBERT + ["convert", tmp_path / "squad", tmp_path / "hf", "--to", "huggingface"])
    assert "fine-tuned BertSpanLabeler as transformers' BertForQuestionAnswering" in out
    load_in_transformers(tmp_path / "hf", "BertForQuestionAnswering")  # every weight used
    run(KBERT + ["convert", tmp_path / "hf", tmp_path / "back", "--to", "google"])
    inputs = random_inputs((2, 10))
    real = inputs["padding_mask"].astype(bool)
    ours, back = (m.predict(inputs, verbose=0) for m in (
        model, BertSpanLabeler.from_pretrained(str(tmp_path / "back"))))
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(back[key][real], ours[key][real], atol=1e-5)
    assert transformers.AutoConfig.from_pretrained(str(tmp_path / "hf")).architectures == [
        "BertForQuestionAnswering"]
    context = "w7 w8 w9 w10 w11"  # `kbert predict` answers from the checkpoint alone
    answer, _ = run(KBERT + ["predict", tmp_path / "squad", "--question", "w5 w6",
                             "--context", context])
    answer = json.loads(answer)
    assert answer["answer"] and answer["answer"] == context[answer["start"]:answer["end"]]
