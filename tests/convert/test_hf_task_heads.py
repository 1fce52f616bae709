"""Fine-tuned task models written as the `transformers` classes for their tasks
(`kbert.convert.save_hf`, `kbert.convert.task_heads`): Hugging Face loads every weight (none
missing, none unexpected) and its PyTorch model gives kbert's logits."""

import json
import shutil

import numpy as np
import pytest
import torch
import transformers

import kbert
from kbert.convert import save_google, save_hf
from kbert.models import (BertClassifier, BertFeatureClassifier, BertMultipleChoice,
                          BertSpanLabeler, BertTokenClassifier)

CONFIG = kbert.BertConfig(vocab_size=120, hidden_size=32, num_layers=2, num_heads=4,
                          intermediate_size=64, max_position_embeddings=40)
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def random_inputs(shape, seed=0):
    """Token ids, two segments and right padding of random lengths, [*shape]."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, shape[-1] + 1, shape[:-1])
    mask = (np.arange(shape[-1]) < lengths[..., None]).astype("int32")
    ids = rng.integers(5, CONFIG.vocab_size, shape).astype("int32") * mask
    segments = (np.arange(shape[-1]) >= lengths[..., None] // 2).astype("int32") * mask
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


def load_in_transformers(path, architecture):
    model, info = getattr(transformers, architecture).from_pretrained(
        str(path), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    return model.eval()


def hf_logits(model, inputs):
    with torch.no_grad():
        return model(input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
                     token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long)
                     ).logits.numpy()


def with_random_head(model, layer):
    """Head weights far from the initialiser's, so a transposed kernel cannot pass."""
    kernel, bias = model.get_layer(layer).get_weights()
    rng = np.random.default_rng(1)
    model.get_layer(layer).set_weights([rng.normal(size=kernel.shape).astype("float32"),
                                        rng.normal(size=bias.shape).astype("float32")])
    return model


@pytest.mark.parametrize("num_classes", [3, 1])
def test_a_classifier_is_bert_for_sequence_classification(tmp_path, num_classes):
    model = with_random_head(BertClassifier(kbert.BertBackbone(CONFIG), num_classes), "classifier")
    names = ["negative", "neutral", "positive"] if num_classes == 3 else None
    save_hf(model, tmp_path, label_names=names)
    reference = load_in_transformers(tmp_path, "BertForSequenceClassification")
    inputs = random_inputs((4, 16))
    np.testing.assert_allclose(hf_logits(reference, inputs), model.predict(inputs, verbose=0),
                               atol=1e-5)
    if names:
        assert reference.config.id2label == dict(enumerate(names))
        assert reference.config.problem_type == "single_label_classification"
    else:
        assert reference.config.problem_type == "regression"  # MSE loss in transformers


def test_a_token_classifier_is_bert_for_token_classification(tmp_path):
    model = with_random_head(BertTokenClassifier(kbert.BertBackbone(CONFIG), label_names=TAGS),
                             "classifier")
    save_hf(model, tmp_path)
    reference = load_in_transformers(tmp_path, "BertForTokenClassification")
    assert reference.config.id2label == dict(enumerate(TAGS))  # the model's own tags
    inputs = random_inputs((3, 12))
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(hf_logits(reference, inputs)[real],
                               model.predict(inputs, verbose=0)[real], atol=1e-5)


def test_a_multiple_choice_model_is_bert_for_multiple_choice(tmp_path):
    model = with_random_head(BertMultipleChoice(kbert.BertBackbone(CONFIG), num_choices=3),
                             "choice_scorer")
    save_hf(model, tmp_path)
    reference = load_in_transformers(tmp_path, "BertForMultipleChoice")
    inputs = random_inputs((2, 3, 10))
    np.testing.assert_allclose(hf_logits(reference, inputs), model.predict(inputs, verbose=0),
                               atol=1e-5)


def test_a_span_labeler_is_bert_for_question_answering(tmp_path):
    model = with_random_head(BertSpanLabeler(kbert.BertBackbone(CONFIG)), "span_logits")
    save_hf(model, tmp_path)
    reference = load_in_transformers(tmp_path, "BertForQuestionAnswering")
    inputs = random_inputs((3, 14))
    with torch.no_grad():
        answer = reference(**{hf: torch.tensor(inputs[k], dtype=torch.long) for hf, k in (
            ("input_ids", "token_ids"), ("token_type_ids", "segment_ids"),
            ("attention_mask", "padding_mask"))})
    ours = model.predict(inputs, verbose=0)
    real = inputs["padding_mask"].astype(bool)  # kbert sets padding to -1e4; HF does not
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(getattr(answer, key).numpy()[real], ours[key][real],
                                   atol=1e-5)


def test_heads_without_a_transformers_class_are_refused(tmp_path):
    backbone = kbert.BertBackbone(CONFIG)
    with pytest.raises(ValueError, match="BertFeatureClassifier has no Hugging Face task"):
        save_hf(BertFeatureClassifier(backbone, 2, layers=(-1,)), tmp_path / "features")
    tagger = BertTokenClassifier(backbone, label_names=TAGS, feature_layers=(-1,))
    with pytest.raises(ValueError, match="BiLSTM head"):
        save_hf(tagger, tmp_path / "bilstm")
    with pytest.raises(ValueError, match="3 label names for a head of 2"):
        save_hf(BertClassifier(backbone, 2), tmp_path / "labels", label_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="left-to-right task model"):
        save_hf(BertClassifier(kbert.BertBackbone(CONFIG, causal=True), 2), tmp_path / "ltr")
    with pytest.raises(ValueError, match="run_classifier.py.*not a BertMultipleChoice"):
        save_google(BertMultipleChoice(backbone, num_choices=2), tmp_path / "google")
    assert not any(tmp_path.iterdir())


# --- in: transformers' fine-tuned task models as kbert task models --------------------------

TEXTS = ["A joy to watch, funny and warm.", "Dull.", "Angela Merkel visited Paris in 1990."]


@pytest.fixture(scope="module")
def hf_task_dir(minilm_dir, tmp_path_factory):
    """`make(architecture, **config)`: a small randomly initialised transformers task model on
    MiniLM's vocabulary, saved as a Hugging Face directory a user would download."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))

    def make(architecture, **extra):
        torch.manual_seed(0)
        config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, max_position_embeddings=64,
                                         **extra)
        path = tmp_path_factory.mktemp(architecture)
        getattr(transformers, architecture)(config).eval().save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))  # transformers 5: tokenizer.json, no vocab.txt
        return path, transformers.AutoTokenizer.from_pretrained(str(path))

    return make


@pytest.mark.slow
def test_a_hugging_face_sequence_classifier_answers_alike_in_kbert(hf_task_dir):
    """Raw text in: kbert's tokenizer and packing, Hugging Face's tokenizer there."""
    path, tokenizer = hf_task_dir("BertForSequenceClassification", num_labels=3)
    model = BertClassifier.from_pretrained(path)
    reference = load_in_transformers(path, "BertForSequenceClassification")
    with torch.no_grad():
        expected = reference(**tokenizer(TEXTS, padding=True, return_tensors="pt")).logits
    np.testing.assert_allclose(model.predict(TEXTS, verbose=0), expected.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="num_classes=3, not 2"):
        BertClassifier.from_pretrained(path, num_classes=2)
    # Another task on the same checkpoint gets a new head; the encoder loads without a pooler.
    assert BertTokenClassifier.from_pretrained(path, num_classes=4).num_classes == 4


def test_a_hugging_face_token_classifier_answers_alike_in_kbert(hf_task_dir):
    path, _ = hf_task_dir("BertForTokenClassification", num_labels=len(TAGS),
                                  id2label=dict(enumerate(TAGS)))
    model = BertTokenClassifier.from_pretrained(path)
    assert model.label_names == TAGS
    inputs = random_inputs((3, 12))
    reference = hf_logits(load_in_transformers(path, "BertForTokenClassification"), inputs)
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(model.predict(inputs, verbose=0)[real], reference[real],
                               atol=1e-5)


@pytest.mark.slow
def test_a_hugging_face_question_answerer_answers_alike_in_kbert(hf_task_dir):
    path, _ = hf_task_dir("BertForQuestionAnswering")
    model = BertSpanLabeler.from_pretrained(path)
    inputs = random_inputs((3, 14))
    answer = load_in_transformers(path, "BertForQuestionAnswering")(
        input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
        token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
        attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long))
    ours = model.predict(inputs, verbose=0)
    real = inputs["padding_mask"].astype(bool)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(ours[key][real], getattr(answer, key).detach().numpy()[real],
                                   atol=1e-5)


def test_a_hugging_face_multiple_choice_model_answers_alike_in_kbert(hf_task_dir):
    path, _ = hf_task_dir("BertForMultipleChoice")
    model = BertMultipleChoice.from_pretrained(path, num_choices=3)
    inputs = random_inputs((2, 3, 10))
    reference = load_in_transformers(path, "BertForMultipleChoice")
    np.testing.assert_allclose(model.predict(inputs, verbose=0), hf_logits(reference, inputs),
                               atol=1e-5)


@pytest.mark.slow
def test_kbert_export_and_predict_take_a_hugging_face_classifier(hf_task_dir, tmp_path,
                                                                  capsys):
    """`kbert export HF_DIR OUT` and `kbert predict HF_DIR` on a transformers classifier (no
    kbert run): the SavedModel, in a new process, and predict answer raw text with
    transformers' probabilities and the names of its `id2label`; `kbert convert` keeps those
    names too. The commands run through `kbert_cli.main` in this process."""
    from tests.test_cli_processes import SERVE, cli, python

    def kbert(*command):
        status, out, err = cli(capsys, *command)
        assert status == 0, (command, err[-3000:])
        return out

    names = ["negative", "neutral", "positive"]
    path, tokenizer = hf_task_dir("BertForSequenceClassification", num_labels=3,
                                  id2label=dict(enumerate(names)))
    kbert("export", path, tmp_path / "served")
    label, probabilities = python(SERVE, tmp_path / "served" / "1", TEXTS[0])
    reference = load_in_transformers(path, "BertForSequenceClassification")
    with torch.no_grad():
        expected = torch.softmax(reference(**tokenizer(TEXTS[:2], return_tensors="pt",
                                                       padding=True)).logits, -1).numpy()
        pair = torch.softmax(reference(**tokenizer(TEXTS[:1], TEXTS[1:2],
                                                   return_tensors="pt")).logits, -1).numpy()[0]
    assert label == names[int(expected[0].argmax())]
    np.testing.assert_allclose(probabilities, expected[0], atol=1e-5)
    single = json.loads(kbert("predict", path, "--text", TEXTS[1]))
    assert single["label"] == names[int(expected[1].argmax())]
    np.testing.assert_allclose(single["probabilities"], expected[1], atol=1e-5)
    both = kbert("predict", path, "--text", TEXTS[0], "--text-pair", TEXTS[1])
    np.testing.assert_allclose(json.loads(both)["probabilities"], pair, atol=1e-5)
    kbert("convert", path, tmp_path / "again", "--to", "huggingface")
    assert transformers.AutoConfig.from_pretrained(str(tmp_path / "again")).id2label == \
        dict(enumerate(names))


@pytest.mark.slow
def test_a_pickled_fine_tuned_checkpoint_is_read_only_when_allowed(minilm_dir, tmp_path,
                                                                   capsys):
    """An older transformers classifier (pytorch_model.bin only): `kbert convert`, `predict`,
    `export`, `finetune --init` and `pretrain --init` refuse to unpickle it unless
    `--allow-pickle` (through `kbert_cli.main`: a refusal costs no process of its own), and
    then use its weights: `convert` and `predict` in new processes, the others in-process."""
    import keras

    from kbert_cli import main
    from tests.test_cli_processes import KBERT, run, run_together

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=64, num_labels=3)
    config.architectures = ["BertForSequenceClassification"]
    reference = transformers.BertForSequenceClassification(config).eval()
    old = tmp_path / "old"
    old.mkdir()  # as transformers 4 wrote it by default before safetensors
    config.save_pretrained(str(old))
    torch.save(reference.state_dict(), old / "pytorch_model.bin")
    shutil.copy(minilm_dir / "vocab.txt", old / "vocab.txt")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"One of {d}.\nTwo of {d}.\nThree." for d in range(40)))
    commands = {
        "convert": KBERT + ["convert", old, tmp_path / "new", "--to", "huggingface"],
        "predict": KBERT + ["predict", old, "--text", TEXTS[0]],
        # a rate too small to move a weight: the run's encoder is the checkpoint's
        "finetune": KBERT + ["finetune", "--init", old, "--steps", "1", "--batch-size", "4",
                             "--sequence-length", "32", "--learning-rate", "1e-12",
                             "--max-train-examples", "4", "--max-eval-examples", "4",
                             "--output", tmp_path / "ft"],
        "pretrain": KBERT + ["pretrain", "--init", old, "--corpus", corpus, "--steps", "1",
                             "--batch-size", "2", "--sequence-length", "32",
                             "--output", tmp_path / "pre"]}
    for name, command in commands.items():
        assert main([str(c) for c in command[len(KBERT):]]) == 2, name
        err = capsys.readouterr().err
        assert "--allow-pickle" in err and err.count("\n") == 1, (name, err[-2000:])
    assert not (tmp_path / "ft").exists() and not (tmp_path / "pre").exists()

    run(commands["convert"] + ["--allow-pickle"])
    converted = load_in_transformers(tmp_path / "new", "BertForSequenceClassification")
    inputs = random_inputs((2, 9))
    np.testing.assert_allclose(hf_logits(converted, inputs), hf_logits(reference, inputs),
                               atol=1e-5)
    (pickled, _), (safe, _) = run_together(
        commands["predict"] + ["--allow-pickle"],
        KBERT + ["predict", tmp_path / "new", "--text", TEXTS[0]])
    assert json.loads(pickled) == json.loads(safe)

    def allowed(command):
        return [str(c) for c in command[len(KBERT):]] + ["--allow-pickle"]

    assert main(allowed([*KBERT, "export", old, tmp_path / "served"])) == 0
    assert main(allowed(commands["pretrain"])) == 0
    with pytest.warns(UserWarning, match="head of 3 outputs, not this task's 2: a new head"):
        assert main(allowed(commands["finetune"])) == 0
    assert (tmp_path / "served" / "1" / "saved_model.pb").is_file()
    trained = keras.saving.load_model(tmp_path / "ft" / "model.keras").backbone
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(trained.token_embedding.embeddings),
        reference.bert.embeddings.word_embeddings.weight.detach().numpy(), atol=1e-6)
    assert json.loads((tmp_path / "pre" / "metrics.json").read_text())["init_heads"] == []
