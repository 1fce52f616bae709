"""SQuAD and CoNLL through the one fine-tuning driver, in this process: training, the run
directory, evaluate and predict (tests/test_cli_processes.py runs the same jobs as a user does,
each command in a new process)."""

import json

import keras
import pytest

from kbert.data.conll import read_conll
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from kbert.runs import RunDirectory
from kbert.tasks import squad as squad_spec
from kbert.tasks.squad import _squad_splits as squad_splits
from kbert.training.finetune import evaluate_run, finetune, predict_run
from tests.spans.helpers import squad_json
from tests.spans.test_squad_data import CONTEXT

OTHER = "The museum of art opened in London in 1990. It shows cats and dogs."
QUESTIONS = [("Where was Peter Smith born?", "Paris"), ("What flows through Paris?", "Seine"),
             ("Who visited the tower?", "John"), ("Where is the art museum?", "Berlin")]


def _squad_dir(tmp_path):
    articles = [("Paris", [(CONTEXT, [(f"p{i}", q, [(a, None)])
                                      for i, (q, a) in enumerate(QUESTIONS)])]),
                ("London", [(OTHER, [("l0", "When did the museum open?", [("1990", None)]),
                                     ("l1", "Where is the museum?", [("London", None)])])])]
    for split in ("train", "dev"):
        squad_json(tmp_path / f"{split}-v1.1.json", articles)
    return tmp_path


def _common(tmp_path, name):
    return dict(init="tiny", output_dir=tmp_path / name, steps=2, batch_size=4, verbose=0)


@pytest.mark.slow
def test_finetune_squad2_from_v1_with_unanswerable_questions(tmp_path, monkeypatch):
    data = _squad_dir(tmp_path)
    splits = squad_splits("2.0", data, 0.5)
    assert len(splits["dev"]) == 9 and sum(e.is_impossible for e in splits["dev"]) == 3
    assert all(e.context != CONTEXT for e in splits["dev"]
               if e.is_impossible and e.title == "London" and e.id.startswith("p"))
    metrics = finetune("squad2", data_dir=data, sequence_length=48,
                       task_options={"doc_stride": 16, "max_query_length": 12},
                       **_common(tmp_path, "run2"))
    run = tmp_path / "run2"
    assert json.loads((run / "metrics.json").read_text()) == json.loads(json.dumps(metrics))
    info = RunDirectory.open(run).info
    assert info["version"] == "2.0" and info["task_options"]["doc_stride"] == 16
    assert info["settings"]["sequence_length"] == 48
    assert metrics["task"] == "squad2" and metrics["eval_split"] == "dev"
    assert 0 <= metrics["exact_match"] <= metrics["f1"] <= 100
    assert metrics["features"] > metrics["total"] == 9  # windows
    assert list((run / "logs").rglob("events.out.tfevents.*"))
    assert isinstance(keras.saving.load_model(run / "model.keras"), BertSpanLabeler)
    assert len(json.loads((run / "predictions.json").read_text())["dev"]) == 9
    with pytest.raises(ValueError, match="question and context"):
        predict_run(run, text="Peter")
    # A question without text asks nothing: refused, as the export refuses it
    # (tests/export/test_span_signature.py). A context without text has no answer.
    for blank in ("", " ", "\u200b"):  # a zero-width space is a format character, dropped
        with pytest.raises(ValueError, match="question of row 1 is blank"):
            predict_run(run, question=["Who?", blank], context=[CONTEXT, CONTEXT])
    # Questions are windowed in chunks; the row named is the request's, not the chunk's.
    monkeypatch.setattr(squad_spec, "WINDOW_CHUNK", 2)
    with pytest.raises(ValueError, match="question of row 4 is blank"):
        predict_run(run, question=["Who?"] * 4 + [" "], context=[CONTEXT] * 5)
    assert predict_run(run, question="Who?", context=" \t") == {
        "answer": "", "start": -1, "end": -1, "score": None, "null_score_diff": None}
    assert metrics["no_answer_total"] == 3 and metrics["has_answer_total"] == 6
    assert "best_f1_threshold" in metrics and metrics["best_f1"] >= metrics["f1"] - 1e-9
    # a threshold above every diff answers everything; below every diff abstains
    answer = predict_run(tmp_path / "run2", question="Where was Peter Smith born?",
                         context=CONTEXT, null_threshold=-1e9)
    assert answer["answer"] == "" and answer["start"] == -1
    answer = predict_run(tmp_path / "run2", question="Where was Peter Smith born?",
                         context=CONTEXT, null_threshold=1e9)
    assert answer["answer"] and CONTEXT[answer["start"]:answer["end"]] == answer["answer"]


def _conll_dir(tmp_path):
    # IOB1, as the original shared-task files
    sentence = ("-DOCSTART- -X- -X- O\n\nPeter NNP I-NP I-PER\nSmith NNP I-NP I-PER\n"
                "visited VBD I-VP O\nParis NNP I-NP I-LOC\n. . O O\n\n"
                "John NNP I-NP I-PER\nlives VBZ I-VP O\nin IN I-PP O\nBerlin NNP I-NP I-LOC\n\n")
    for name in ("train.txt", "valid.txt", "test.txt"):
        (tmp_path / name).write_text(sentence * 3)
    return tmp_path


@pytest.mark.slow
def test_finetune_conll_writes_entity_scores_and_tags_raw_text(tmp_path, mode="feature"):
    """Feature mode here; full fine-tuning of CoNLL runs as a user runs it in
    tests/test_cli_processes.py (finetune, evaluate, predict, export)."""
    data = _conll_dir(tmp_path)
    assert read_conll(data / "train.txt")[1] == "iob1"
    metrics = finetune("conll", data_dir=data, mode=mode, sequence_length=32,
                       **_common(tmp_path, mode))
    run = tmp_path / mode
    assert json.loads((run / "metrics.json").read_text()) == json.loads(json.dumps(metrics))
    for split in ("dev", "test"):
        assert {"precision", "recall", "f1", "per_type"} <= set(metrics[split])
    assert metrics["f1"] == metrics["test"]["f1"] and metrics["test"]["gold"] == 12
    label_names = RunDirectory.open(run).info["label_names"]
    assert label_names[0] == "O" and len(label_names) == 9
    sizes = metrics["sizes"]
    assert sizes["trainable_parameters"] < sizes["backbone_parameters"] / 10
    assert sizes["model_parameters"] > sizes["backbone_parameters"]  # the head's own weights
    model = keras.saving.load_model(run / "model.keras")
    assert isinstance(model, BertTokenClassifier) and model.is_feature_based == (mode == "feature")
    text = "Peter Smith visited Paris, and John lives in Berlin."
    entities = predict_run(run, text=text)
    for entity in entities:
        assert text[entity["start"]:entity["end"]] == entity["text"]
        assert entity["type"] in {"PER", "LOC", "ORG", "MISC"}
    assert predict_run(run, text=["", text])[0] == []
    scores = evaluate_run(run, split="dev", data_dir=data)
    assert scores["examples"] == 6 and scores["f1"] == pytest.approx(metrics["dev"]["f1"])


def test_unknown_task_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="Unknown task 'swag'") as refused:
        finetune("swag", output_dir=tmp_path)
    known = str(refused.value).split("known: ")[1]
    assert {"sentiment", "qnli", "mmlu", "squad", "squad2", "conll"} <= set(known.split(", "))
    with pytest.raises(ValueError, match="version"):
        from kbert.tasks.squad import SquadTask

        SquadTask("3.0")
