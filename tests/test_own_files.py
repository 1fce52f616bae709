"""One's own files in one command: `kbert finetune --train-file F` on CSV / TSV / JSON Lines
sentences, CoNLL-format tags and SQuAD-format JSON, label names read from the data and kept
through predict and export; a bad file named by file, line (and column) before any output is
written."""

import csv
import json
import sys

import pytest

from kbert.data.own_files import DataFiles, file_kind
from kbert.data.tasks import DataError, hold_out, label_kind, table_task
from kbert.tasks.own_files import file_spec
from kbert_cli import main

from tests.test_cli_processes import KBERT, SERVE, python, run, run_together


FLOORS = {"conll": 0.1, "squad": 2.0}
"""What the tiny CoNLL and SQuAD runs score above (entity F1 in [0, 1]; SQuAD F1 in %): an
untrained head scores about 0."""


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def rejected(capsys, tmp_path, *args):
    """The one error line of `kbert finetune ARGS` (exit status 2), once its output folder is
    checked not to exist."""
    output = tmp_path / "run"
    status = main(["finetune", *map(str, args), "--preset", "tiny", "--steps", "1",
                   "--output", str(output)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert not output.exists()
    return lines[0]


# ------------------------------------------------------------------ what the data says

def test_label_names_are_the_data_sorted_and_map_every_split(tmp_path):
    train = write(tmp_path / "train.csv", "review,stars\nok,b\nbad,c\ngood,a\nfine,b\n")
    dev = write(tmp_path / "dev.csv", "review,stars\nmeh,c\nnice,a\n")
    task = table_task(train, dev, text_column="review", label_column="stars")
    assert task.kind == "classification" and task.label_names == ("a", "b", "c")
    assert task.splits["train"] == [("ok", 1), ("bad", 2), ("good", 0), ("fine", 1)]
    assert task.splits["dev"] == [("meh", 2), ("nice", 0)]
    assert label_kind("f", [(2, "10"), (3, "9"), (4, "09")], "y") == \
        ("classification", ("9", "10"))  # integers sort as numbers


def test_float_labels_make_a_regression(tmp_path):
    train = write(tmp_path / "train.jsonl", '{"text": "a", "label": 1}\n'
                  '{"text": "b", "label": 2.5}\n{"text": "c", "label": "-0.5"}\n')
    dev = write(tmp_path / "dev.jsonl", '{"text": "d", "label": 3}\n')
    task = table_task(train, dev)
    assert task.kind == "regression" and task.num_classes == 1 and task.label_names is None
    assert task.splits["train"] == [("a", 1.0), ("b", 2.5), ("c", -0.5)]
    assert task.splits["dev"] == [("d", 3.0)]


def test_pairs_are_read_from_a_text_pair_column(tmp_path):
    train = write(tmp_path / "train.tsv", "text\ttext_pair\tlabel\nA\tB\tyes\nC\tD\tno\n")
    spec = file_spec(DataFiles(str(train), validation_file=str(train)))
    assert spec.task.is_pair and spec.task.splits["train"] == [(("A", "B"), 1), (("C", "D"), 0)]


def test_the_held_out_tenth_is_seeded_and_disjoint(tmp_path):
    examples = [(f"text {n}", n % 2) for n in range(95)]
    train, dev = hold_out(examples, seed=0)
    assert len(dev) == 10 and len(train) == 85
    assert not set(train) & set(dev) and sorted(train + dev) == sorted(examples)
    assert hold_out(examples, seed=0) == (train, dev)  # the same tenth every time
    assert hold_out(examples, seed=1)[1] != dev
    path = write(tmp_path / "train.csv", "text,label\n" + "".join(
        f"text {n},{n % 2}\n" for n in range(95)))
    task = table_task(path)
    assert [t for t, _ in task.splits["dev"]] == [t for t, _ in dev]


def test_the_file_format_decides_the_task(tmp_path):
    squad = write(tmp_path / "q.json", json.dumps({"data": [], "version": "1.1"}, indent=1))
    conll = write(tmp_path / "tags.txt", "-DOCSTART- -X- O O\n\nEU NNP B-ORG\n")
    choices = write(tmp_path / "c.jsonl", '{"question": "q", "choices": ["a", "b"]}\n')
    table = write(tmp_path / "t.jsonl", '{"text": "q", "label": 1}\n')
    assert [file_kind(p) for p in (squad, conll, choices, table)] == \
        ["squad", "conll", "multiple_choice", "sentence"]


def test_multiple_choice_from_json_lines(tmp_path):
    train = write(tmp_path / "quiz.jsonl", "".join(
        json.dumps({"question": f"q{n}", "choices": ["x", "y", "z"], "answer": n % 3}) + "\n"
        for n in range(20)))
    spec = file_spec(DataFiles(str(train)))
    assert spec.kind == "multiple_choice" and spec.task.num_classes == 3
    assert len(spec.task.splits["train"]) == 18 and len(spec.task.splits["dev"]) == 2


# ------------------------------------------------------------------ bad files, one line each

def test_a_missing_column_is_named(capsys, tmp_path):
    train = write(tmp_path / "train.csv", "review,label\nfine,pos\n")
    line = rejected(capsys, tmp_path, "--train-file", train, "--text-column", "text")
    assert f"{train}:1: header lacks the columns ['text']" in line
    jsonl = write(tmp_path / "train.jsonl", '{"text": "a", "label": 1}\n{"label": 0}\n')
    assert f"{jsonl}:2: missing column 'text'" in rejected(capsys, tmp_path,
                                                          "--train-file", jsonl)


def test_an_empty_or_unreadable_file_is_named(capsys, tmp_path):
    empty = write(tmp_path / "empty.csv", "")
    assert f"{empty}: empty file." in rejected(capsys, tmp_path, "--train-file", empty)
    header = write(tmp_path / "header.csv", "text,label\n")
    assert f"{header}: no examples." in rejected(capsys, tmp_path, "--train-file", header)
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(b"text,label\ngood,1\ncaf\xe9,0\n")
    assert f"{latin1}:3: not UTF-8 text (byte 0xe9 at column 4)" in rejected(
        capsys, tmp_path, "--train-file", latin1)
    missing = tmp_path / "missing.csv"
    assert str(missing) in rejected(capsys, tmp_path, "--train-file", missing)


def test_a_validation_or_test_label_not_in_training_is_named(capsys, tmp_path):
    train = write(tmp_path / "train.csv", "text,label\na,neg\nb,pos\nc,pos\n")
    dev = write(tmp_path / "dev.csv", "text,label\nd,pos\ne,meh\n")
    line = rejected(capsys, tmp_path, "--train-file", train, "--validation-file", dev)
    assert f"{dev}:3: label 'meh' in column 'label' is not one of the training file's " \
           "labels ['neg', 'pos']." in line
    test = write(tmp_path / "test.jsonl", '{"text": "f", "label": "neutral"}\n')
    line = rejected(capsys, tmp_path, "--train-file", train, "--validation-file", train,
                    "--test-file", test)
    assert f"{test}:1: label 'neutral'" in line


def test_mixed_label_types_are_named(capsys, tmp_path):
    train = write(tmp_path / "train.csv", "text,label\na,1\nb,0\nc,pos\n")
    line = rejected(capsys, tmp_path, "--train-file", train)
    assert f"{train}:4: label 'pos' in column 'label' is a word, but line 2's label '1' is " \
           "a number" in line


def test_a_conll_line_without_a_tag_is_named(capsys, tmp_path):
    train = write(tmp_path / "train.conll", "-DOCSTART- O\n\nEU B-ORG\nrejects\n")
    line = rejected(capsys, tmp_path, "--train-file", train)
    assert f"{train}:4: expected 'word ... tag', got 'rejects'." in line
    dev = write(tmp_path / "dev.conll", "Ann B-PER\n\nBob O\nsings B-SONG\n")
    good = write(tmp_path / "good.conll", "EU B-ORG\nsays O\n\nAnn B-PER\n")
    line = rejected(capsys, tmp_path, "--train-file", good, "--validation-file", dev)
    assert f"{dev}:4: tag 'B-SONG' is not in the training file's tags" in line


def test_a_squad_answer_outside_its_context_is_named(capsys, tmp_path):
    data = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{
        "context": "Ann was born in Paris.",
        "qas": [{"id": "q1", "question": "Where?", "answers": [
            {"text": "Paris", "answer_start": 16}]},
                {"id": "q2", "question": "Who?", "answers": [
                    {"text": "Bob", "answer_start": 0}]}]}]}]}
    train = write(tmp_path / "train.json", json.dumps(data, indent=1))
    text = train.read_text()
    at = text.index('"id": "q2"')
    line_number, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    line = rejected(capsys, tmp_path, "--train-file", train)
    assert f"{train}:{line_number}:{column}: question 'q2': answer 'Bob' does not match the " \
           "context at answer_start=0 (found 'Ann')." in line


# ------------------------------------------------------------------ through the command

def movie_reviews_csv(folder):
    """The sentiment task's train and dev splits as CSV files with columns `review` and
    `sentiment` and labels `neg` / `pos`."""
    from kbert.data.tasks import sentiment_task

    task = sentiment_task()
    paths = {}
    for split in ("train", "dev"):
        paths[split] = folder / f"{split}.csv"
        with open(paths[split], "w", newline="", encoding="utf-8") as f:
            rows = csv.writer(f)
            rows.writerow(["review", "sentiment"])
            rows.writerows([text, ("neg", "pos")[label]] for text, label in task.splits[split])
    return paths


@pytest.mark.slow
def test_movie_reviews_of_ones_own_fine_tune_predict_and_serve_their_label_names(tmp_path):
    paths = movie_reviews_csv(tmp_path)
    output = tmp_path / "reviews"
    out, _ = run(KBERT + ["finetune", "--train-file", paths["train"], "--validation-file",
                          paths["dev"], "--text-column", "review", "--label-column",
                          "sentiment", "--steps", "60", "--batch-size", "16",
                          "--sequence-length", "64", "--learning-rate", "1e-4",
                          "--max-eval-examples", "300",
                          "--verbose", "0", "--output", output])
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["task"] == "sentence" and metrics["sizes"]["dev"] == 300
    assert metrics["accuracy"] > 0.7, metrics["accuracy"]  # chance: 0.5
    assert json.loads((output / "run.json").read_text())["label_names"] == ["neg", "pos"]

    texts = write(tmp_path / "texts.jsonl", '{"text": "A warm, funny, moving film."}\n'
                  '{"text": "Dull, lifeless and far too long."}\n')
    predicted, _ = run(KBERT + ["predict", output, "--input", texts])
    assert [json.loads(a)["label"] for a in predicted.splitlines()] == ["pos", "neg"]
    run(KBERT + ["export", output, tmp_path / "served"])
    label, _ = python(SERVE, tmp_path / "served" / "1", "A warm, funny, moving film.")
    assert label == "pos"


def conll_file(path, sentences):
    """`sentences` (`TaggedSentence`) written in CoNLL's layout: a token and its tag a line."""
    blocks = ["\n".join(f"{w} {t}" for w, t in zip(s.words, s.tags)) for s in sentences]
    return write(path, "-DOCSTART- O\n\n" + "\n\n".join(blocks) + "\n")


def squad_file(path, examples):
    """`examples` (`SquadExample`) written in SQuAD's layout, one paragraph a question."""
    articles = [{"title": e.title, "paragraphs": [{"context": e.context, "qas": [{
        "id": e.id, "question": e.question,
        "answers": [{"text": t, "answer_start": s} for t, s in e.answers]}]}]}
        for e in examples]
    return write(path, json.dumps({"version": "1.1", "data": articles}))


@pytest.mark.slow
def test_conll_and_squad_files_of_ones_own_fine_tune_and_evaluate(tmp_path):
    from kbert.data.conll import conll2003
    from kbert.data.sources import fetch
    from kbert.data.squad import read_squad

    tags = conll2003()
    conll = conll_file(tmp_path / "ner.conll", tags["train"][:400])
    squad = fetch("squad")
    questions = {split: read_squad(squad / f"{split}-v1.1.json")[0]
                 for split in ("train", "dev")}
    squad_train = squad_file(tmp_path / "qa-train.json", questions["train"][:300])
    squad_dev = squad_file(tmp_path / "qa-dev.json", questions["dev"][:64])
    (ner_out, _), (qa_out, _) = run_together(
        KBERT + ["finetune", "--train-file", conll, "--steps", "40", "--batch-size", "16",
                 "--learning-rate", "1e-4", "--verbose", "0", "--output", tmp_path / "ner"],
        KBERT + ["finetune", "--train-file", squad_train, "--validation-file", squad_dev,
                 "--steps", "20", "--batch-size", "16", "--sequence-length", "128",
                 "--doc-stride", "64", "--max-query-length", "32", "--learning-rate", "1e-4",
                 "--verbose", "0", "--output", tmp_path / "qa"])
    assert "No validation file: a seeded tenth of ner.conll is held out" in ner_out
    assert "No validation file" not in qa_out
    ner = json.loads((tmp_path / "ner" / "run.json").read_text())
    assert ner["task"] == "conll" and ner["task_options"]["files"]["train"] == str(conll)
    assert json.loads((tmp_path / "qa" / "run.json").read_text())["task"] == "squad"

    evaluated = run_together(KBERT + ["evaluate", tmp_path / "ner"],
                             KBERT + ["evaluate", tmp_path / "qa"])
    scores = [json.loads((tmp_path / run_dir / "eval_dev" / "metrics.json").read_text())
              for run_dir in ("ner", "qa")]
    assert "conll dev (40 examples)" in evaluated[0][0]
    assert "squad dev (64 examples)" in evaluated[1][0]
    assert scores[0]["f1"] > FLOORS["conll"], scores[0]
    assert scores[1]["f1"] > FLOORS["squad"], scores[1]
