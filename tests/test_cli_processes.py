"""The documented CLI steps, each in a new process, as a user runs them: nothing a training
process registered or imported is there when `evaluate`, `predict`, `export` or a plain
`keras.saving.load_model` after `import kbert` run."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "kbert")
KBERT = [_SCRIPT] if os.path.isfile(_SCRIPT) else [sys.executable, "-m", "kbert.cli"]
TEXT = "A joy to watch, funny and warm."


def run(command, timeout=900):
    """(stdout, stderr) of a command that must succeed, in a new process."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{command} failed:\n{done.stderr[-3000:]}"
    return done.stdout, done.stderr


def python(code, *args):
    """The last stdout line of `python -c code args` in a new process, parsed as JSON."""
    out, _ = run([sys.executable, "-c", code, *args])
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sentiment_run(tmp_path_factory):
    output = tmp_path_factory.mktemp("cli") / "sentiment"
    out, _ = run(KBERT + ["finetune", "--task", "sentiment", "--preset", "tiny", "--steps", "3",
                          "--batch-size", "8", "--max-eval-examples", "32", "--output", output])
    assert "test: accuracy" in out
    return output


@pytest.mark.slow
def test_evaluate_a_run_in_a_new_process(sentiment_run):
    out, _ = run(KBERT + ["evaluate", sentiment_run, "--split", "dev",
                          "--max-eval-examples", "32"])
    assert "sentiment dev (32 examples): accuracy" in out
    saved = json.loads((sentiment_run / "eval_dev" / "metrics.json").read_text())
    assert saved["examples"] == 32 and 0 <= saved["accuracy"] <= 1


@pytest.mark.slow
def test_predict_load_model_and_export_agree_in_new_processes(sentiment_run, tmp_path):
    out, _ = run(KBERT + ["predict", sentiment_run, "--text", TEXT])
    predicted = json.loads(out)
    assert predicted["label"] in ("negative", "positive")

    # the repro: nothing but `import kbert` before loading the saved model
    loaded = python("import json, sys, kbert, keras; "
                    "m = keras.saving.load_model(sys.argv[1] + '/model.keras'); "
                    "print(json.dumps(m.predict([sys.argv[2]], verbose=0).tolist()))",
                    sentiment_run, TEXT)
    probabilities = np.exp(loaded[0]) / np.exp(loaded[0]).sum()
    np.testing.assert_allclose(probabilities, predicted["probabilities"], atol=1e-5)

    out, _ = run(KBERT + ["export", sentiment_run, tmp_path / "served"])
    version = tmp_path / "served" / "1"
    assert (version / "saved_model.pb").is_file()
    served = python("import json, sys, tensorflow as tf, tensorflow_text; "
                    "f = tf.saved_model.load(sys.argv[1]).signatures['serving_default']; "
                    "r = f(text=tf.constant([sys.argv[2]])); "
                    "print(json.dumps([r['label'].numpy()[0].decode(), "
                    "r['probabilities'].numpy()[0].tolist()]))", version, TEXT)
    assert served[0] == predicted["label"]  # label names come from the run
    np.testing.assert_allclose(served[1], predicted["probabilities"], atol=1e-5)


def test_commands_on_a_directory_that_is_not_a_run(tmp_path):
    for command in (["evaluate", tmp_path], ["predict", tmp_path, "--text", "x"],
                    ["export", tmp_path, tmp_path / "out"]):
        done = subprocess.run([str(c) for c in KBERT + command], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 2, done.stderr[-2000:]
        assert "holds no model.keras or run.json" in done.stderr


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
    return grpc


@pytest.mark.slow
def test_squad_run_evaluates_predicts_and_serves_the_same_answers(tmp_path):
    output = tmp_path / "squad"
    run(KBERT + ["finetune", "--task", "squad", "--preset", "tiny", "--steps", "2",
                 "--batch-size", "8", "--sequence-length", "128", "--max-train-examples", "32",
                 "--max-eval-examples", "16", "--output", output])
    out, _ = run(KBERT + ["evaluate", output, "--max-eval-examples", "8"])
    assert "squad dev (8 examples): exact_match" in out
    out, _ = run(KBERT + ["predict", output, "--question", QUESTION, "--context", CONTEXT])
    answer = json.loads(out)
    assert CONTEXT[answer["start"]:answer["end"]] == answer["answer"] != ""
    run(KBERT + ["export", output, tmp_path / "served"])
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
                 "--batch-size", "8", "--max-train-examples", "32", "--max-eval-examples", "16",
                 "--output", output])
    out, _ = run(KBERT + ["evaluate", output, "--split", "dev", "--max-eval-examples", "8"])
    assert "conll dev (8 examples): precision" in out
    out, _ = run(KBERT + ["predict", output, "--text", NER_TEXT])
    entities = json.loads(out)
    for entity in entities:
        assert NER_TEXT[entity["start"]:entity["end"]] == entity["text"]
    run(KBERT + ["export", output, tmp_path / "served"])
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
    out, _ = run(KBERT + ["vocab", "--corpus", corpus, "--size", "150",
                          "--output", tmp_path / "vocab.txt"])
    tokens = (tmp_path / "vocab.txt").read_text().splitlines()
    assert tokens[0] == "[PAD]" and "document" in tokens and "Wrote" in out

    run(KBERT + ["convert", "minilm_l6_h384_uncased", tmp_path / "google", "--to", "google"])
    run(KBERT + ["convert", tmp_path / "google", tmp_path / "hf", "--to", "huggingface"])
    assert (tmp_path / "hf" / "model.safetensors").is_file()

    out, _ = run(KBERT + ["pretrain", "--preset", "tiny", "--corpus", corpus, "--steps", "2",
                          "--batch-size", "4", "--sequence-length", "32",
                          "--output", tmp_path / "pre"])
    assert "held-out: mlm_accuracy" in out
    # the pretrained weights start a fine-tuning run, in yet another process
    run(KBERT + ["finetune", "--task", "sentiment", "--init", tmp_path / "pre" / "model",
                 "--steps", "1", "--batch-size", "4", "--max-eval-examples", "8",
                 "--output", tmp_path / "ft"])
    assert json.loads((tmp_path / "ft" / "run.json").read_text())["task"] == "sentiment"
