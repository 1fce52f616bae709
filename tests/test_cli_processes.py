"""The documented CLI steps, each in a new process, as a user runs them: nothing a training
process registered or imported is there when `evaluate`, `predict`, `export` or a plain
`keras.saving.load_model` after `import kbert` run."""

import fcntl
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "kbert")
KBERT = [_SCRIPT] if os.path.isfile(_SCRIPT) else [sys.executable, "-m", "kbert_cli"]
TEXT = "A joy to watch, funny and warm."
# A TensorFlow C++ log line ("I0000 00:00:1795553959.357388   25393 cudart_stub.cc:31] ...") or
# the absl banner before it: no kbert command prints one unless KBERT_LOG asks.
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]|absl::InitializeLog", re.M)


def assert_quiet(command, stderr):
    """For `kbert` commands (other processes here load TensorFlow themselves)."""
    command = command[2:] if command[0] == "env" else command
    if [str(c) for c in command[:len(KBERT)]] != KBERT:
        return
    found = CPP_LOG_LINE.search(stderr)
    assert found is None, f"{command} printed a TensorFlow C++ log line:\n{stderr[-2000:]}"


def run(command, timeout=900, cwd=None):
    """(stdout, stderr) of a command that must succeed, in a new process."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    assert done.returncode == 0, f"{command} failed:\n{done.stderr[-3000:]}"
    assert_quiet(command, done.stderr)
    return done.stdout, done.stderr


def run_together(*commands, timeout=900, expect=None):
    """(stdout, stderr) of each command, run side by side in new processes (they only read
    what they share): most of a command's seconds are its single-threaded start. `expect`:
    each command's exit status (default 0: it must also be quiet)."""
    procs = [subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for command in commands]
    outputs = [proc.communicate(timeout=timeout) for proc in procs]
    for command, proc, (_, err), status in zip(commands, procs, outputs,
                                               expect or [0] * len(commands)):
        assert proc.returncode == status, f"{command} exited {proc.returncode}:\n{err[-3000:]}"
        if status == 0:
            assert_quiet(command, err)
    return outputs


def without_task_data(command, cache):
    """`command` run with the empty directory `cache` as kbert's data cache: any task data it
    reads would be fetched into it."""
    cache.mkdir(exist_ok=True)
    return ["env", f"KBERT_CACHE={cache}", *command]


def fetched(cache):
    """The registry artifacts in `cache` (each unpacks into a directory; the tokenizer's
    Unicode tables, built here, are files)."""
    return [path.name for path in cache.iterdir() if path.is_dir()]


def python(code, *args):
    """The last stdout line of `python -c code args` in a new process, parsed as JSON."""
    out, _ = run([sys.executable, "-c", code, *args])
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def sentiment_run(tmp_path_factory, worker_id):
    """One tiny sentiment run for the tests here, trained by whichever pytest-xdist worker asks
    first while the others wait on a lock (the workers share their base folder's parent)."""
    shared = tmp_path_factory.getbasetemp()
    shared = shared if worker_id == "master" else shared.parent
    output = shared / "cli-sentiment"
    with open(shared / "cli-sentiment.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (output / "run.json").is_file():
            out, _ = run(KBERT + ["finetune", "--task", "sentiment", "--preset", "tiny",
                                  "--steps", "3", "--batch-size", "8", "--max-eval-examples",
                                  "32", "--output", output])
            assert "test: accuracy" in out
    return output


LOAD_AND_PREDICT = ("import json, sys, kbert, keras; "
                    "m = keras.saving.load_model(sys.argv[1] + '/model.keras'); "
                    "print(json.dumps(m.predict([sys.argv[2]], verbose=0).tolist()))")
SERVE = ("import json, sys, tensorflow as tf, tensorflow_text; "
         "f = tf.saved_model.load(sys.argv[1]).signatures['serving_default']; "
         "r = f(text=tf.constant([sys.argv[2]])); "
         "print(json.dumps([r['label'].numpy()[0].decode(), "
         "r['probabilities'].numpy()[0].tolist()]))")


@pytest.mark.slow
def test_evaluate_predict_load_model_and_export_agree_in_new_processes(sentiment_run, tmp_path):
    evaluated, predicted, loaded, _ = run_together(
        KBERT + ["evaluate", sentiment_run, "--split", "dev", "--max-eval-examples", "32"],
        without_task_data(KBERT + ["predict", sentiment_run, "--text", TEXT], tmp_path / "cache"),
        # the repro: nothing but `import kbert` before loading the saved model
        [sys.executable, "-c", LOAD_AND_PREDICT, sentiment_run, TEXT],
        KBERT + ["export", sentiment_run, tmp_path / "served"])
    assert "sentiment dev (32 examples): accuracy" in evaluated[0]
    assert fetched(tmp_path / "cache") == []  # run.json held all that predict needed
    saved = json.loads((sentiment_run / "eval_dev" / "metrics.json").read_text())
    assert saved["examples"] == 32 and 0 <= saved["accuracy"] <= 1

    predicted = json.loads(predicted[0])
    assert predicted["label"] in ("negative", "positive")
    logits = json.loads(loaded[0].strip().splitlines()[-1])[0]
    probabilities = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(probabilities, predicted["probabilities"], atol=1e-5)

    version = tmp_path / "served" / "1"
    assert (version / "saved_model.pb").is_file()
    served = python(SERVE, version, TEXT)
    assert served[0] == predicted["label"]  # label names come from the run
    np.testing.assert_allclose(served[1], predicted["probabilities"], atol=1e-5)


def cli(capsys, *command):
    """`kbert command` in this process (`kbert_cli.main`): (exit status, stdout, stderr). For
    what a new process adds nothing to: refusals, and answers other tests get from one."""
    from kbert_cli import main

    capsys.readouterr()
    status = main([str(c) for c in command])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow
def test_finetune_keeps_a_finished_run_and_evaluate_its_scores(sentiment_run, tmp_path, capsys):
    """Re-running finetune into a finished run is refused before any work (`--overwrite`
    replaces it: tests/test_kills.py); evaluating the run on another task writes beside its
    own scores, not over them; an --output that is a file is named, for both commands."""
    glue = tmp_path / "SST-2"  # a GLUE directory as the benchmark's files lay it out
    glue.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (glue / name).write_text("sentence\tlabel\nwarm and funny\t1\na dull mess\t0\n",
                                 encoding="utf-8")
    (tmp_path / "file").write_text("")
    before = (sentiment_run / "model.keras").stat().st_mtime_ns
    done = [cli(capsys, *command) for command in (
        ["finetune", "--preset", "tiny", "--steps", "1", "--output", sentiment_run],
        ["finetune", "--preset", "tiny", "--steps", "1", "--output", tmp_path / "file"],
        ["evaluate", sentiment_run, "--output", tmp_path / "file"],
        ["evaluate", sentiment_run, "--task", "glue:SST-2", "--data-dir", glue, "--split",
         "dev"])]
    assert [d[0] for d in done] == [2, 2, 2, 0], [d[2][-2000:] for d in done]
    assert f"{sentiment_run} holds a finished 'sentiment' run; pass --overwrite to train " \
        "afresh" in done[0][2]
    assert (sentiment_run / "model.keras").stat().st_mtime_ns == before
    assert f"{tmp_path / 'file'} is a file" in done[1][2]
    assert f"{tmp_path / 'file'} is a file, not a directory for --output" in done[2][2]
    other = json.loads((sentiment_run / "eval_glue-SST-2_dev" / "metrics.json").read_text())
    assert other["task"] == "glue:SST-2" and other["examples"] == 2


@pytest.mark.slow
def test_predict_reads_bytes_that_are_not_utf8_as_google_does(sentiment_run, tmp_path, capsys):
    """A shell passes bytes: Python holds those that are not UTF-8 as lone surrogates (as
    `os.fsdecode` gives them here), which TensorFlow refused ("Unable to convert element to
    UTF-8"). They read as U+FFFD, which the tokenizer deletes (Google's `_clean_text`), as does
    a JSON line's lone "\\ud800"."""
    (tmp_path / "in.jsonl").write_text('{"text": "bad \\ud800 byte"}\n', encoding="utf-8")
    answers = [cli(capsys, "predict", sentiment_run, *args) for args in (
        ["--text", os.fsdecode(b"bad \xff byte")], ["--text", "bad byte"],
        ["--input", tmp_path / "in.jsonl"])]
    assert [status for status, _, _ in answers] == [0, 0, 0]
    bad, plain, from_file = (json.loads(out) for _, out, _ in answers)
    assert bad == plain == from_file


@pytest.mark.slow
def test_a_run_whose_model_is_of_another_task_is_named(sentiment_run, tmp_path, capsys):
    """model.keras copied in from another run (a tagger under a sentiment run.json): predict
    ended in a traceback (IndexError) and export in a message about label counts."""
    from tests.tasks.test_tagging_long_text import tagger

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "run.json").write_bytes((sentiment_run / "run.json").read_bytes())
    tagger().save(mixed / "model.keras")
    for command in (["predict", mixed, "--text", TEXT], ["export", mixed, tmp_path / "served"]):
        status, _, err = cli(capsys, *command)
        assert status == 2, err[-3000:]
        assert f"{mixed}: its model.keras does not fit its run.json (Task 'sentiment' takes " \
            "a BertClassifier or BertFeatureClassifier; the model is a BertTokenClassifier); " \
            "were they written by different runs?" in err
    assert not (tmp_path / "served").exists()


@pytest.mark.slow
def test_export_refuses_pairs_for_a_single_sentence_run(sentiment_run, tmp_path, capsys):
    """`kbert export RUN OUT --pair` of a run trained on single sentences served it pairs
    without a word."""
    status, _, err = cli(capsys, "export", sentiment_run, tmp_path / "served", "--pair")
    assert status == 2, err[-3000:]
    assert err.strip().endswith(
        "answers task 'sentiment' with single sentences, as it was trained: --pair would "
        "serve it text pairs it never saw."), err[-3000:]
    assert not (tmp_path / "served").exists()


# [sequence length, pooled output] of the TF Hub pair in argv[1], then the pooled output that
# the encoder's own SavedModel in argv[3] serves, for the text argv[2]: one process loads both.
HUB_AND_ENCODER = ("import json, sys, tensorflow as tf, tensorflow_text; "
                   "pre = tf.saved_model.load(sys.argv[1] + '/preprocessor'); "
                   "enc = tf.saved_model.load(sys.argv[1] + '/encoder'); "
                   "x = pre(tf.constant([sys.argv[2]])); "
                   "f = tf.saved_model.load(sys.argv[3]).signatures['serving_default']; "
                   "print(json.dumps([x['input_word_ids'].shape[1], "
                   "enc(x)['pooled_output'].numpy()[0].tolist(), "
                   "f(text=tf.constant([sys.argv[2]]))['pooled_output'].numpy()[0].tolist()]))")


@pytest.mark.slow
def test_a_runs_fine_tuned_encoder_converts_to_tf_hub(sentiment_run, tmp_path, capsys):
    """`kbert convert RUN DST --to tf_hub`: the run's encoder (not the checkpoint it started
    from) behind TF Hub's preprocessor and encoder, at the run's sequence length. Both are
    written in this process and read in a new one, which loads TensorFlow alone."""
    import keras

    assert cli(capsys, "convert", sentiment_run, tmp_path / "hub", "--to", "tf_hub")[0] == 0
    # the same encoder as a SavedModel of its own (the run's labels stay behind: "label_names
    # apply to classifiers, not to a backbone" refused it)
    assert cli(capsys, "export", sentiment_run, tmp_path / "encoder", "--task",
               "backbone")[0] == 0
    length, pooled, served = python(HUB_AND_ENCODER, tmp_path / "hub", TEXT,
                                    tmp_path / "encoder" / "1")
    model = keras.saving.load_model(sentiment_run / "model.keras")
    assert length == model.preprocessor.sequence_length
    expected = model.backbone(model.preprocessor([TEXT]))["pooled_output"]
    np.testing.assert_allclose(pooled, np.asarray(expected)[0], atol=1e-5)
    np.testing.assert_allclose(served, np.asarray(expected)[0], atol=1e-5)


HF_PIPELINE = ("import json, sys, transformers; "
               "classify = transformers.pipeline('text-classification', model=sys.argv[1]); "
               "print(json.dumps(classify(sys.argv[2])[0]))")


@pytest.mark.slow
def test_a_run_converts_to_a_hugging_face_classifier(sentiment_run, tmp_path, capsys):
    """`kbert convert RUN DST --to huggingface`: transformers' text-classification pipeline,
    in a new process, answers with the run's label and probability."""
    import keras

    status, out, _ = cli(capsys, "convert", sentiment_run, tmp_path / "hf", "--to",
                         "huggingface")
    assert status == 0
    assert "as transformers' BertForSequenceClassification" in out
    answer = python(HF_PIPELINE, tmp_path / "hf", TEXT)
    model = keras.saving.load_model(sentiment_run / "model.keras")
    logits = np.asarray(model.predict([TEXT], verbose=0))[0]
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    labels = json.loads((sentiment_run / "run.json").read_text())["label_names"]
    assert answer["label"] == labels[int(probabilities.argmax())]
    assert answer["score"] == pytest.approx(float(probabilities.max()), abs=1e-5)


# Each format a classifier run converts to besides transformers: what loads it in a new process
# (kbert reads run_classifier.py's head from a Google checkpoint), the flags it needs, what
# `convert` says, and how close it answers (keras-hub has tanh-GELU only; the tiny preset's is
# exact).
CONVERTED_CLASSIFIERS = {
    "google": ("kbert.BertClassifier.from_pretrained", [],
               "as a Google TF1 checkpoint with its head", 1e-5),
    "keras_hub": ("keras_hub.models.TextClassifier.from_preset", ["--allow-approximation"],
                  "as keras-hub's BertTextClassifier", 1e-4),
}
PREDICT_CONVERTED = ("import json, sys, kbert, keras_hub; m = {load}(sys.argv[1]); "
                     "print(json.dumps(m.predict([sys.argv[2]], verbose=0).tolist()))")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(CONVERTED_CLASSIFIERS))
def test_a_classifier_run_converts_to(fmt, sentiment_run, tmp_path, capsys):
    """`kbert convert RUN DST --to google|keras_hub`: the converted model takes raw text and
    answers as the run."""
    import keras

    from kbert_cli import main

    load, flags, says, atol = CONVERTED_CLASSIFIERS[fmt]
    command = KBERT + ["convert", sentiment_run, tmp_path / fmt, "--to", fmt]
    if flags:  # refused without them, naming them (in-process: a refusal needs no process)
        assert main([str(c) for c in command[len(KBERT):]]) == 2
        assert flags[0] in capsys.readouterr().err and not (tmp_path / fmt).exists()
    if flags:  # the warning as the command prints it: in its own process
        out, err = run(command + flags)
    else:
        status, out, err = cli(capsys, *command[len(KBERT):])
        assert status == 0, err
    assert says in out
    if flags:  # the warning in one line of the command's, not Python's path, class and code
        assert "kbert convert: warning: keras-hub's BertBackbone cannot compute this model " \
            "exactly" in err and "UserWarning" not in err
    logits = python(PREDICT_CONVERTED.format(load=load), tmp_path / fmt, TEXT)[0]
    model = keras.saving.load_model(sentiment_run / "model.keras")
    np.testing.assert_allclose(logits, model.predict([TEXT], verbose=0)[0], atol=atol)


LOAD_AND_PREDICT_MANY = ("import json, sys, kbert, keras; "
                         "m = keras.saving.load_model(sys.argv[1] + '/model.keras'); "
                         "texts = json.load(open(sys.argv[2], encoding='utf-8')); "
                         "print(json.dumps(m.predict(texts, verbose=0).tolist()))")


@pytest.mark.slow
def test_predict_a_file_of_inputs(sentiment_run, tmp_path):
    """`kbert predict --input`: one answer a line, in the file's order, equal to the saved
    model's own predictions, whatever the batch size, from a file or standard input."""
    texts = [TEXT, "Dull. [SEP] Dull again.", "Caf\u00e9 na\u00efve \u2713", "x",
             "The plot made no sense and the dialogue was worse."]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    requests = "\n".join(json.dumps({"text": t}) for t in texts) + "\n\n"  # + a blank line
    (tmp_path / "in.jsonl").write_text(requests, encoding="utf-8")
    answers = tmp_path / "new" / "answers.jsonl"  # its folder is made, as kbert vocab's is
    (_, wrote), (loaded, _) = run_together(
        KBERT + ["predict", sentiment_run, "--input", tmp_path / "in.jsonl", "--output",
                 answers, "--batch-size", "2"],
        [sys.executable, "-c", LOAD_AND_PREDICT_MANY, sentiment_run, tmp_path / "texts.json"])
    piped = subprocess.run([str(c) for c in KBERT + ["predict", sentiment_run, "--input", "-",
                                                     "--output", "-"]],
                           input=requests, capture_output=True, text=True, timeout=600,
                           cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert not (tmp_path / "-").exists()  # - is standard output, not a file named -
    assert f"Wrote 5 answers to {answers}" in wrote
    from_file = [json.loads(line) for line in answers.read_text(encoding="utf-8").splitlines()]
    assert from_file == [json.loads(line) for line in piped.stdout.splitlines()]
    logits = np.array(json.loads(loaded.strip().splitlines()[-1]))
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose([a["probabilities"] for a in from_file], probabilities,
                               atol=1e-5)
    assert [a["label_id"] for a in from_file] == probabilities.argmax(-1).tolist()


def test_predict_answers_go_to_a_file(tmp_path):
    """Not a directory (the error named kbert's hidden staging file), checked before the model
    loads, in the one error line of a new `kbert predict` process."""
    (tmp_path / "in.jsonl").write_text('{"text": "hi"}\n', encoding="utf-8")
    done = subprocess.run([str(c) for c in KBERT + ["predict", "minilm_l6_h384_uncased",
                                                    "--input", tmp_path / "in.jsonl",
                                                    "--output", tmp_path]],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"--output {tmp_path} is a directory" in done.stderr


@pytest.mark.slow
def test_a_run_answers_away_from_its_data(tmp_path, capsys):
    """A run trained on a GLUE directory given relative to the working directory: `evaluate`
    finds the data from elsewhere (run.json keeps the absolute path), and `predict` answers
    the same once the data is gone (run.json holds the labels and that it reads pairs)."""
    rte = tmp_path / "RTE"
    rte.mkdir()
    rows = ["index\tsentence1\tsentence2\tlabel",
            "0\tA cat sat on the mat.\tA cat sat.\tentailment",
            "1\tThe dog barked.\tNo animal made a sound.\tnot_entailment"]
    for split in ("train", "dev"):
        (rte / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    from kbert_cli import main  # in-process: the new process is the end of the story

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        assert main(["finetune", "--task", "glue", "--data-dir", "RTE", "--preset", "tiny",
                     "--steps", "2", "--batch-size", "2", "--output", "run"]) == 0
    pair = ["--text", "A cat sat on the mat.", "--text-pair", "A cat sat."]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "run"), "--split", "dev"]) == 0
    assert "glue dev (2 examples): accuracy" in capsys.readouterr().out
    assert main(["predict", str(tmp_path / "run"), *pair]) == 0
    before = capsys.readouterr().out
    assert main(["predict", str(tmp_path / "run"), *pair[:2]]) == 2
    assert "reads sentence pairs: give --text-pair too" in capsys.readouterr().err
    rte.rename(tmp_path / "moved")
    after, _ = run(without_task_data(KBERT + ["predict", "../run", *pair], tmp_path / "cache"),
                   cwd=elsewhere)
    assert json.loads(after) == json.loads(before)
    assert json.loads(after)["label"] in ("entailment", "not_entailment")
    assert fetched(tmp_path / "cache") == []


QUESTION = "Which river flows through the city?"
CONTEXT = ("Paris is the capital of France. The Seine flows through the city, past the Louvre, "
           "where Peter Smith from London saw the Mona Lisa in 1990.")
NER_TEXT = "Peter Smith visited Paris and London with Angela Merkel."


def serve_in_emulator(tmp_path, export, inputs):
    """The export's answers from the TF Serving emulator (tests/export/serving_client.py),
    which loads it with TensorFlow and tensorflow-text ops only."""
    client = os.path.join(os.path.dirname(__file__), "export", "serving_client.py")
    job = {"exports": {"model": str(export)}, "inputs": {"model": inputs}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    run([sys.executable, client, tmp_path / "job.json", tmp_path / "result.json"])
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["errors"] == [] and result["modules"] == [], result["errors"]
    assert all(r == sorted(r) and r for r in result["grpc"]["model"]["warmup"])
    grpc = result["grpc"]["model"]["predict"]["ok"]
    assert grpc == result["serving_default"]["model"]  # gRPC and the SavedModel agree
    assert result["grpc"]["model"]["examples"] == {"ok": grpc}  # the same rows as tf.Examples
    assert result["grpc"]["model"]["examples_missing_feature"] == {"error": "INVALID_ARGUMENT"}
    return grpc


@pytest.mark.slow
def test_squad_run_evaluates_predicts_and_serves_the_same_answers(tmp_path):
    output = tmp_path / "squad"
    run(KBERT + ["finetune", "--task", "squad", "--preset", "tiny", "--steps", "2",
                 "--batch-size", "8", "--sequence-length", "128", "--max-train-examples", "32",
                 "--max-eval-examples", "16", "--output", output])
    requests = tmp_path / "questions.jsonl"
    requests.write_text("\n".join(json.dumps({"question": q, "context": CONTEXT})
                                  for q in (QUESTION, "Who saw the Mona Lisa?")))
    blank = tmp_path / "blank.jsonl"  # a question without text, on line 4, is named by line
    blank.write_text(requests.read_text() + "\n\n" + json.dumps(
        {"question": " \u200b ", "context": CONTEXT}))
    (evaluated, _), (out, _), _, (many, _), (_, refused) = run_together(
        KBERT + ["evaluate", output, "--max-eval-examples", "8"],
        # a byte that is not UTF-8 is read as U+FFFD, which the tokenizer deletes: the answer
        # is the plain question's (the file's first line, and the export's)
        without_task_data(KBERT + ["predict", output, "--question", os.fsdecode(
            QUESTION.encode() + b" \xff"), "--context", CONTEXT], tmp_path / "cache"),
        KBERT + ["export", output, tmp_path / "served"],
        KBERT + ["predict", output, "--input", requests],
        KBERT + ["predict", output, "--input", blank], expect=(0, 0, 0, 0, 2))
    assert refused.strip().endswith('The "question" of line 4 is blank (no word piece: it is '
                                    "empty, or only spaces or characters the tokenizer drops).")
    assert "squad dev (8 examples): exact_match" in evaluated
    assert fetched(tmp_path / "cache") == []
    answer = json.loads(out)
    assert CONTEXT[answer["start"]:answer["end"]] == answer["answer"] != ""
    many = [json.loads(line) for line in many.splitlines()]
    assert len(many) == 2 and many[0]["answer"] == answer["answer"]
    assert many[0]["score"] == pytest.approx(answer["score"], abs=1e-4)
    served = serve_in_emulator(tmp_path, tmp_path / "served" / "1",
                               {"question": [QUESTION, "Who saw the Mona Lisa?"],
                                "context": [CONTEXT, CONTEXT]})
    assert served["answer"][0] == answer["answer"]
    assert (served["start_char"][0], served["end_char"][0]) == (answer["start"], answer["end"])
    assert served["score"][0] == pytest.approx(answer["score"], abs=1e-4)


@pytest.mark.slow
def test_conll_run_evaluates_predicts_and_serves_the_same_entities(tmp_path):
    output = tmp_path / "ner"
    run(KBERT + ["finetune", "--task", "conll", "--preset", "tiny", "--steps", "2",
                 "--batching", "length", "--batch-size", "8", "--max-train-examples", "32",
                 "--max-eval-examples", "16", "--output", output])
    requests = tmp_path / "texts.jsonl"
    requests.write_text("\n".join(json.dumps({"text": t}) for t in (
        NER_TEXT, "John lives in Berlin.", "John \ud800 lives in Berlin.")))  # lone surrogate
    (evaluated, _), (out, _), _, (many, _) = run_together(
        KBERT + ["evaluate", output, "--split", "dev", "--max-eval-examples", "8"],
        without_task_data(KBERT + ["predict", output, "--text", NER_TEXT], tmp_path / "cache"),
        KBERT + ["export", output, tmp_path / "served"],
        KBERT + ["predict", output, "--input", requests])
    assert "conll dev (8 examples): precision" in evaluated
    assert fetched(tmp_path / "cache") == []
    entities = json.loads(out)
    many = [json.loads(line) for line in many.splitlines()]
    assert len(many) == 3 and many[0] == entities
    # the lone surrogate reads as U+FFFD, which the tokenizer deletes: the same words tagged
    assert [(e["text"], e["type"]) for e in many[2]] == [(e["text"], e["type"]) for e in many[1]]
    for entity in entities:
        assert NER_TEXT[entity["start"]:entity["end"]] == entity["text"]
    served = serve_in_emulator(tmp_path, tmp_path / "served" / "1",
                               {"text": [NER_TEXT, "John lives in Berlin."]})
    count = served["entity_count"][0]
    assert [{"text": t, "type": k, "start": s, "end": e} for t, k, s, e in zip(
        *(served[f"entity_{n}"][0][:count] for n in ("text", "label", "start", "end")))
    ] == entities


@pytest.mark.slow
def test_vocab_convert_and_pretrain_in_new_processes(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(  # one sentence per line, blank line between documents
        "\n".join(f"Sentence {i} of document {d} is about topic {d % 3}." for i in range(6))
        for d in range(40)) + "\n")
    (vocab_out, _), _, (pretrain_out, _) = run_together(
        KBERT + ["vocab", "--corpus", corpus, "--size", "170", "--output", tmp_path / "vocab.txt"],
        KBERT + ["convert", "minilm_l6_h384_uncased", tmp_path / "google", "--to", "google"],
        KBERT + ["pretrain", "--preset", "tiny", "--corpus", corpus, "--steps", "2",
                 "--batch-size", "4", "--sequence-length", "32", "--output", tmp_path / "pre"])
    tokens = (tmp_path / "vocab.txt").read_text().splitlines()
    assert tokens[0] == "[PAD]" and "document" in tokens and "Wrote 170 uncased" in vocab_out
    assert len(tokens) == 170
    assert "held-out: mlm_accuracy" in pretrain_out

    # The converted checkpoint converts again; the pretrained weights fine-tune, pre-train
    # further from where the first run ended, heads included, and fill blanks.
    blank = "Sentence 3 of document [MASK] is about topic 1."
    _, _, (again_out, _), (filled, _) = run_together(
        KBERT + ["convert", tmp_path / "google", tmp_path / "hf", "--to", "huggingface"],
        KBERT + ["finetune", "--task", "sentiment", "--init", tmp_path / "pre" / "model",
                 "--steps", "1", "--batch-size", "4", "--max-eval-examples", "8",
                 "--output", tmp_path / "ft"],
        KBERT + ["pretrain", "--init", tmp_path / "pre" / "model", "--corpus", corpus,
                 "--steps", "1", "--batch-size", "4", "--sequence-length", "32",
                 "--output", tmp_path / "again"],
        KBERT + ["predict", tmp_path / "pre" / "model", "--text", blank, "--top-k", "3"])
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "ft" / "run.json").read_text())["task"] == "sentiment"
    first, again = (json.loads((tmp_path / run / "metrics.json").read_text())
                    for run in ("pre", "again"))
    assert again["init_heads"] == ["masked LM", "next sentence"]
    assert "its encoder and masked LM and next sentence head(s)" in again_out
    # The same held-out documents and masks: the second run starts where the first ended.
    for key in ("mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        assert again["start"][key] == pytest.approx(first[key], abs=1e-5), key
    # The run's masked LM answers as transformers' fill-mask pipeline on the same directory.
    import transformers

    reference = transformers.pipeline("fill-mask", model=str(tmp_path / "pre" / "model"),
                                      top_k=3)(blank)
    blanks = json.loads(filled)["blanks"]
    assert [c["id"] for c in blanks[0]] == [c["token"] for c in reference]
    np.testing.assert_allclose([c["score"] for c in blanks[0]],
                               [c["score"] for c in reference], atol=1e-5)


def test_version_names_kbert_and_the_packages_it_runs_on():
    """`kbert --version`, what a bug report starts from: each package's version as the package
    itself gives it in this process."""
    import keras
    import keras_hub
    import tensorflow as tf
    import tensorflow_text

    import kbert

    stdout, _ = run([*KBERT, "--version"], timeout=120)
    assert stdout == (f"kbert {kbert.__version__} (tensorflow {tf.__version__}, tensorflow-text "
                      f"{tensorflow_text.__version__}, keras {keras.__version__}, keras-hub "
                      f"{keras_hub.__version__})\n")
