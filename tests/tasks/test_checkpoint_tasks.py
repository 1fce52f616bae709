"""`kbert evaluate`, `predict --task`, `export --task` and `finetune --init` on checkpoints
fine-tuned in transformers (no kbert run): the task's data scored and answered by the model's
own head, checked against transformers' PyTorch model on the same examples and the independent
metric (seqeval for entities, SQuAD's official one for spans)."""

import json

import numpy as np
import pytest
import torch
import transformers

from kbert.data.conll import CONLL2003_LABELS
from kbert.data.tasks import load_task
from kbert.runs import RunDirectory
from kbert.tasks import EVAL_SEED, get_spec, subset
from kbert.training.finetune import evaluate_run, predict_run

# The order of transformers' CoNLL-2003 taggers (e.g. dslim/bert-base-NER), not kbert's.
HF_CONLL_TAGS = ["O", "B-MISC", "I-MISC", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
LENGTH = 64  # the small model's positions: kbert packs at most this many tokens


@pytest.fixture(scope="module")
def hf_model(minilm_dir, tmp_path_factory):
    """`make(architecture, **config)`: a small random transformers task model on MiniLM's
    vocabulary, saved as a user would download it, with its PyTorch model and tokenizer; 64
    positions unless told (SQuAD's windows need 384). Weights at std 0.5, not 0.02, so that
    logits lie far apart and argmax is the same in both frameworks."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))

    def make(architecture, **extra):
        torch.manual_seed(0)
        config = transformers.BertConfig(
            vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, initializer_range=0.5,
            **{"max_position_embeddings": LENGTH, **extra})
        path = tmp_path_factory.mktemp(architecture)
        model = getattr(transformers, architecture)(config).eval()
        model.save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))
        return path, model, tokenizer

    return make


def sentiment_reference(reference, tokenizer):
    """48 sentiment dev examples (the subset kbert scores), their texts, transformers'
    probabilities and its labels (id2label, lower case) for them."""
    examples = subset(load_task("sentiment").splits["dev"], 48, EVAL_SEED)
    texts = [text for text, _ in examples]
    with torch.no_grad():
        logits = reference(**tokenizer(texts, padding=True, truncation=True,
                                       max_length=LENGTH, return_tensors="pt")).logits
    probabilities = torch.softmax(logits, -1).numpy()
    labels = [reference.config.id2label[i].lower() for i in probabilities.argmax(-1)]
    assert len(set(labels)) == 2  # both labels are answered: a swap would show
    return examples, texts, probabilities, labels


def conll_reference(reference, tokenizer):
    """(gold, transformers' tags) for the 40 CoNLL dev sentences kbert scores: the tag at each
    word's first sub-token, "O" for a word past the 64-token window."""
    from seqeval.metrics import precision_score

    sentences = subset(get_spec("conll").splits()["dev"], 40, EVAL_SEED)
    predicted = []
    for sentence in sentences:
        encoded = tokenizer(sentence.words, is_split_into_words=True, truncation=True,
                            max_length=LENGTH, return_tensors="pt")
        with torch.no_grad():
            ids = reference(**encoded).logits[0].argmax(-1).tolist()
        tags = ["O"] * len(sentence.words)
        for position, word in reversed(list(enumerate(encoded.word_ids()))):
            if word is not None:
                tags[word] = reference.config.id2label[ids[position]]  # the first sub-token
        predicted.append(tags)
    gold = [s.tags for s in sentences]
    assert precision_score(gold, predicted) > 0  # some entities are right: the scores test
    return gold, predicted



def test_a_classifier_with_its_own_label_order_is_scored_on_the_tasks_labels(hf_model, tmp_path,
                                                                              capsys):
    """id2label POSITIVE, NEGATIVE: the reverse of the sentiment task's order, in capitals.
    The labels are matched by name as transformers' run_glue.py matches them, so kbert's
    answers are transformers' (a head read in id order would swap every answer)."""
    from tests.test_cli_processes import cli

    path, reference, tokenizer = hf_model("BertForSequenceClassification", num_labels=2,
                                          id2label={0: "POSITIVE", 1: "NEGATIVE"})
    examples, texts, probabilities, expected = sentiment_reference(reference, tokenizer)

    assert cli(capsys, "evaluate", path, "--task", "sentiment", "--split", "dev",
               "--max-eval-examples", "48", "--output", tmp_path / "scores")[0] == 0
    metrics = json.loads((tmp_path / "scores" / "metrics.json").read_text())
    names = ("negative", "positive")
    assert metrics["examples"] == 48
    assert metrics["accuracy"] == pytest.approx(
        np.mean([guess == names[label] for guess, (_, label) in zip(expected, examples)]))

    answers = predict_run(path, task="sentiment", text=texts)
    assert [a["label"] for a in answers] == expected
    np.testing.assert_allclose([a["probabilities"] for a in answers],
                               probabilities[:, ::-1], atol=1e-5)  # columns in task order


def test_a_tagger_is_scored_by_its_own_tag_order(hf_model):
    """A transformers CoNLL tagger (its tags in HF_CONLL_TAGS order) on CoNLL-2003 dev: kbert's
    entity scores equal seqeval's on transformers' tags (the first sub-token of each word; a
    word past the 64-token window is "O")."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    assert HF_CONLL_TAGS != list(CONLL2003_LABELS)
    path, reference, tokenizer = hf_model("BertForTokenClassification",
                                          num_labels=len(HF_CONLL_TAGS),
                                          id2label=dict(enumerate(HF_CONLL_TAGS)))
    gold, predicted = conll_reference(reference, tokenizer)

    metrics = evaluate_run(path, task="conll", split="dev", max_eval_examples=40)
    assert metrics["precision"] == pytest.approx(precision_score(gold, predicted))
    assert metrics["recall"] == pytest.approx(recall_score(gold, predicted))
    assert metrics["f1"] == pytest.approx(f1_score(gold, predicted))


@pytest.mark.slow
def test_a_question_answerer_answers_as_squad2_when_asked(hf_model):
    """Without --task a checkpoint's span model answers as SQuAD v1.1 (always a span); with
    task squad2, Google's run_squad.py rule: no answer ("") exactly where the null score beats
    the best span by more than the threshold, else the same span."""
    path, _, _ = hf_model("BertForQuestionAnswering", max_position_embeddings=384)
    questions = ["Who wrote it?", "Where is it?", "When did it open?", "What is it made of?",
                 "How tall is it?", "Who paid for it?", "Why was it built?", "What is it?"]
    context = ("The tower was designed by Gustave Eiffel's company and opened in Paris in "
               "1889 for the World's Fair. It is made of wrought iron and is 330 metres tall.")
    contexts = [context] * len(questions)
    v1 = predict_run(path, question=questions, context=contexts)
    assert all(a["answer"] for a in v1)
    differences = [a["null_score_diff"] for a in
                   predict_run(path, task="squad2", question=questions, context=contexts)]
    threshold = float(np.median(differences))  # a random head: some answered, some not
    v2 = predict_run(path, task="squad2", question=questions, context=contexts,
                     null_threshold=threshold)
    unanswered = [d > threshold for d in differences]
    assert any(unanswered) and not all(unanswered)
    for old, new, none in zip(v1, v2, unanswered):
        assert new["answer"] == ("" if none else old["answer"])


@pytest.mark.slow
def test_a_question_answerer_is_scored_on_squad_as_it_answers(hf_model, tmp_path, capsys):
    """`kbert evaluate CHECKPOINT --task squad` writes predictions.json in the official scripts'
    form ({question id: answer}), the answers `kbert predict` gives, and scores them with
    SQuAD's official metric (×100)."""
    from kbert.evaluation.squad import squad_metrics
    from tests.test_cli_processes import cli

    path, _, _ = hf_model("BertForQuestionAnswering", max_position_embeddings=384)
    examples = subset(get_spec("squad").splits()["dev"], 12, EVAL_SEED)
    answers = predict_run(path, question=[e.question for e in examples],
                          context=[e.context for e in examples])
    assert cli(capsys, "evaluate", path, "--task", "squad", "--max-eval-examples", "12",
               "--output", tmp_path / "scores")[0] == 0
    predictions = json.loads((tmp_path / "scores" / "predictions.json").read_text())
    assert predictions == {e.id: a["answer"] for e, a in zip(examples, answers)}
    expected = squad_metrics(predictions, {e.id: e.answer_texts for e in examples})
    assert expected["f1"] > 0  # some overlap with the gold answers: the score tests
    metrics = json.loads((tmp_path / "scores" / "metrics.json").read_text())
    assert (metrics["split"], metrics["examples"]) == ("dev", 12)
    assert metrics["exact_match"] == pytest.approx(expected["exact_match"])
    assert metrics["f1"] == pytest.approx(expected["f1"])


@pytest.mark.slow
def test_a_checkpoint_is_scored_only_on_a_task_its_head_fits(hf_model, capsys):
    from kbert_cli import main

    path, _, _ = hf_model("BertForSequenceClassification", num_labels=2)
    assert main(["evaluate", str(path)]) == 2
    assert "names no task to score it on: give one, e.g. --task squad" in capsys.readouterr().err
    with pytest.raises(ValueError, match="takes a BertSpanLabeler; the model is a "
                                         "BertClassifier"):
        evaluate_run(path, task="squad")
    with pytest.raises(ValueError, match="takes a BertMultipleChoice"):
        evaluate_run(path, task="mmlu")
    assert main(["predict", str(path), "--task", "sentiment_score", "--text", "Fine."]) == 2
    assert "'sentiment_score' has 1 outputs; the model has 2" in capsys.readouterr().err
    assert main(["predict", str(path), "--null-threshold", "1", "--text", "Fine."]) == 2
    assert "--null-threshold is SQuAD v2.0's (task squad2)" in capsys.readouterr().err
    # a span model of 64 positions gets windows of 64 (not SQuAD's 384, which it could not
    # embed): a context longer than one window is answered from the windows
    small_qa, _, _ = hf_model("BertForQuestionAnswering")
    context = "Ann went home. " * 30
    assert main(["predict", str(small_qa), "--question", "Who?", "--context", context]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["answer"] and answer["answer"] == context[answer["start"]:answer["end"]]


SERVE_SPANS = ("import json, sys, tensorflow as tf, tensorflow_text; "
               "f = tf.saved_model.load(sys.argv[1]).signatures['serving_default']; "
               "q = json.loads(sys.argv[2]); "
               "r = f(question=tf.constant(q), context=tf.constant([sys.argv[3]] * len(q))); "
               "print(json.dumps([[a.decode() for a in r['answer'].numpy()], "
               "r['null_score_diff'].numpy().tolist()]))")


@pytest.mark.slow
def test_a_question_answerer_exports_as_squad2(hf_model, tmp_path, capsys):
    """`kbert export CHECKPOINT OUT --task squad2 --null-threshold T`: TF Serving's signature,
    in a new process, answers nothing where `kbert predict --task squad2` with that threshold
    does, and the same spans elsewhere."""
    from tests.test_cli_processes import cli, python

    path, _, _ = hf_model("BertForQuestionAnswering", max_position_embeddings=384)
    questions = ["Who wrote it?", "When did it open?", "What is it made of?", "Why was it built?"]
    context = "Paris."  # a short context: the random head's null score wins for some questions
    contexts = [context] * len(questions)
    at_zero = predict_run(path, task="squad2", question=questions, context=contexts)
    threshold = min(a["null_score_diff"] for a in at_zero if a["null_score_diff"] > 0)
    expected = predict_run(path, task="squad2", null_threshold=threshold, question=questions,
                           context=contexts)
    assert {a["answer"] == "" for a in expected} == {True, False}
    assert [a["answer"] for a in expected] != [a["answer"] for a in at_zero]
    assert cli(capsys, "export", path, tmp_path / "served", "--task", "squad2",
               "--null-threshold", repr(threshold))[0] == 0
    answers, differences = python(SERVE_SPANS, tmp_path / "served" / "1", json.dumps(questions),
                                  context)
    assert answers == [a["answer"] for a in expected]
    np.testing.assert_allclose(differences, [a["null_score_diff"] for a in expected],
                               atol=1e-4)


def test_fine_tuning_goes_on_from_a_checkpoints_head(hf_model, tmp_path, capsys):
    """`kbert finetune --init CHECKPOINT` starts from the head the checkpoint holds for the task,
    its labels matched by name, as transformers' from_pretrained goes on from a fine-tuned
    model: after one step at a vanishing rate the run answers as transformers does."""
    from tests.test_cli_processes import cli

    path, reference, tokenizer = hf_model("BertForSequenceClassification", num_labels=2,
                                          id2label={0: "POSITIVE", 1: "NEGATIVE"})
    examples, texts, probabilities, labels = sentiment_reference(reference, tokenizer)
    assert cli(capsys, "finetune", "--task", "sentiment", "--init", path, "--steps", "1",
               "--learning-rate", "1e-12", "--batch-size", "8", "--sequence-length",
               str(LENGTH), "--max-eval-examples", "48", "--output", tmp_path / "run")[0] == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    names = ("negative", "positive")
    assert metrics["dev"]["accuracy"] == pytest.approx(
        np.mean([guess == names[label] for guess, (_, label) in zip(labels, examples)]))
    answers = predict_run(tmp_path / "run", text=texts)
    assert [a["label"] for a in answers] == labels
    np.testing.assert_allclose([a["probabilities"] for a in answers],
                               probabilities[:, ::-1], atol=1e-5)


@pytest.mark.slow
def test_a_tagger_fine_tunes_on_from_its_head_in_the_tasks_tag_order(hf_model, tmp_path):
    from seqeval.metrics import f1_score

    from kbert.training.finetune import finetune

    path, reference, tokenizer = hf_model("BertForTokenClassification",
                                          num_labels=len(HF_CONLL_TAGS),
                                          id2label=dict(enumerate(HF_CONLL_TAGS)))
    gold, predicted = conll_reference(reference, tokenizer)
    metrics = finetune("conll", init=str(path), steps=1, learning_rate=1e-12, batch_size=8,
                       max_train_examples=8, max_eval_examples=40, sequence_length=LENGTH,
                       output_dir=str(tmp_path / "run"))
    assert metrics["dev"]["f1"] == pytest.approx(f1_score(gold, predicted))
    model = RunDirectory.open(tmp_path / "run").load_model()
    assert model.label_names == list(CONLL2003_LABELS)  # the task's order, the head moved


def test_a_head_of_another_size_is_left_out(hf_model, tmp_path):
    from kbert.models import BertClassifier
    from kbert.tasks.pretrained import start_from_fine_tuned_head

    path, _, _ = hf_model("BertForSequenceClassification", num_labels=3)
    model = BertClassifier.from_pretrained(str(path), num_classes=3)
    fresh = BertClassifier(model.backbone, num_classes=2)
    before = fresh.get_layer("classifier").get_weights()
    with pytest.warns(UserWarning, match="head of 3 outputs, not this task's 2: a new head"):
        assert not start_from_fine_tuned_head(fresh, str(path))
    for old, new in zip(before, fresh.get_layer("classifier").get_weights()):
        np.testing.assert_array_equal(old, new)
