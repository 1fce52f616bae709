import json
import pathlib

import keras
import numpy as np
import pytest

from kbert.data.tasks import TaskData
from kbert.training import finetune, lr_sweep


def toy_task(kind="classification"):
    words = ["good", "great", "fine", "bad", "awful", "dull"]
    rng = np.random.default_rng(0)
    examples = []
    for _ in range(48):
        picked = rng.choice(words, 3)
        score = sum(1.0 if w in words[:3] else -1.0 for w in picked)
        label = score if kind == "regression" else int(score > 0)
        examples.append((" ".join(picked), label))
    return TaskData("toy", kind, 1 if kind == "regression" else 2,
                    {"train": examples[:32], "dev": examples[32:40], "test": examples[40:]})


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One learning-rate sweep: two `finetune` runs (most of each is graph tracing, ~10 s). The
    sweep test checks the choice; the run-directory test checks what `finetune` wrote."""
    output_dir = tmp_path_factory.mktemp("sweep")
    return lr_sweep(toy_task(), learning_rates=(1e-3, 1e-6), output_dir=output_dir,
                    init="tiny", steps=3, batch_size=8, sequence_length=16, verbose=0), output_dir


@pytest.mark.slow
def test_finetune_writes_metrics_logs_and_model(sweep):
    summary, _ = sweep
    run = pathlib.Path(summary["best_output_dir"])
    # the sweep's summary is the chosen run's `finetune` return value plus the sweep's keys
    returned = {k: v for k, v in summary.items()
                if k not in ("best_learning_rate", "best_output_dir", "runs")}
    saved = json.loads((run / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(returned))
    for name in ("accuracy", "f1", "matthews_corrcoef"):
        assert 0 <= abs(saved[name]) <= 1 and name in saved["dev"]
    assert saved["eval_split"] == "test" and saved["settings"]["steps"] == 3
    assert list((run / "logs").rglob("events.out.tfevents.*"))
    model = keras.saving.load_model(run / "model.keras")
    assert model.output_shape == (None, 2)
    assert model.preprocessor.tokenizer.get_vocabulary()[0] == "[PAD]"
    info = json.loads((run / "run.json").read_text())
    assert info["task"] == "toy" and info["label_names"] is None
    assert info["settings"] == saved["settings"] and info["settings"]["sequence_length"] == 16


@pytest.mark.slow
def test_finetune_with_xla_trains_on_padded_lengths(tmp_path):
    metrics = finetune(toy_task(), init="tiny", output_dir=tmp_path, steps=4, batch_size=8,
                       sequence_length=16, verbose=0, xla=True)
    assert metrics["settings"]["xla"] is True and np.isfinite(metrics["final_train_loss"])
    model = keras.saving.load_model(tmp_path / "model.keras")
    assert model.output_shape == (None, 2)


@pytest.mark.slow
def test_finetune_without_validation_learns_the_same_weights(tmp_path):
    """Scoring dev between epochs is extra work only: without it the run draws the same
    batches and dropout masks, so weights, loss and the final scores are equal."""
    runs = {validate: finetune(toy_task(), init="tiny", output_dir=tmp_path / str(validate),
                               epochs=2, batch_size=8, sequence_length=16, verbose=0,
                               validate=validate)
            for validate in (True, False)}
    assert (tmp_path / "True/logs/validation").is_dir()
    assert not (tmp_path / "False/logs/validation").exists()
    assert runs[True]["final_train_loss"] == runs[False]["final_train_loss"]
    assert runs[True]["dev"] == runs[False]["dev"] and runs[True]["test"] == runs[False]["test"]
    assert [runs[v]["settings"]["validate"] for v in (True, False)] == [True, False]
    weights = [keras.saving.load_model(tmp_path / str(v) / "model.keras").get_weights()
               for v in (True, False)]
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_finetune_sets_the_encoders_dropout_rates(tmp_path):
    """The rates given replace the checkpoint's in the model that trains and is saved; the
    run records them."""
    metrics = finetune(toy_task(), init="tiny", output_dir=tmp_path, steps=2, batch_size=8,
                       sequence_length=16, verbose=0, hidden_dropout=0.2, attention_dropout=0.0)
    assert (metrics["settings"]["hidden_dropout"], metrics["settings"]["attention_dropout"]) == (
        0.2, 0.0)
    backbone = keras.saving.load_model(tmp_path / "model.keras").backbone
    assert (backbone.config.hidden_dropout, backbone.config.attention_dropout) == (0.2, 0.0)
    assert {block.attention_dropout for block in backbone.encoder_blocks} == {0.0}
    assert {block.dropout for block in backbone.encoder_blocks} == {0.2}


@pytest.mark.slow
def test_regression_finetune_reports_correlations(tmp_path):
    metrics = finetune(toy_task("regression"), init="tiny", output_dir=tmp_path, steps=2,
                       batch_size=8, sequence_length=16, verbose=0)
    assert {"pearson", "spearman"} <= set(metrics["dev"])


@pytest.mark.slow
def test_lr_sweep_keeps_the_best_dev_run(sweep):
    summary, output_dir = sweep
    runs = summary["runs"]
    assert set(runs) == {"0.001", "1e-06"}
    for rate, run in runs.items():  # each rate's own run directory holds its own dev scores
        assert json.loads((pathlib.Path(run["output_dir"]) / "metrics.json").read_text())[
            "dev"] == run["dev"]
    best = max(runs, key=lambda r: runs[r]["dev"]["accuracy"])
    assert summary["best_learning_rate"] == float(best)
    assert json.loads((output_dir / "metrics.json").read_text())["best_learning_rate"] == \
        float(best)
