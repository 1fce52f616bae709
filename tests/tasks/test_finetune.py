import json

import keras
import numpy as np
import pytest

from kbert.data.tasks import Task
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
    return Task("toy", kind, 1 if kind == "regression" else 2,
                {"train": examples[:32], "dev": examples[32:40], "test": examples[40:]})


@pytest.mark.slow
def test_finetune_writes_metrics_logs_and_model(tmp_path):
    metrics = finetune(toy_task(), init="tiny", output_dir=tmp_path, steps=4, batch_size=8,
                       sequence_length=16, verbose=0)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(metrics))
    for name in ("accuracy", "f1", "matthews_corrcoef"):
        assert 0 <= abs(saved[name]) <= 1 and name in saved["dev"]
    assert saved["eval_split"] == "test" and saved["settings"]["steps"] == 4
    assert list((tmp_path / "logs").rglob("events.out.tfevents.*"))
    model = keras.saving.load_model(tmp_path / "model.keras")
    assert model.output_shape == (None, 2)
    assert model.preprocessor.tokenizer.get_vocabulary()[0] == "[PAD]"
    info = json.loads((tmp_path / "run.json").read_text())
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
def test_regression_finetune_reports_correlations(tmp_path):
    metrics = finetune(toy_task("regression"), init="tiny", output_dir=tmp_path, steps=2,
                       batch_size=8, sequence_length=16, verbose=0)
    assert {"pearson", "spearman"} <= set(metrics["dev"])


@pytest.mark.slow
def test_lr_sweep_keeps_the_best_dev_run(tmp_path):
    summary = lr_sweep(toy_task(), learning_rates=(1e-3, 1e-6), output_dir=tmp_path,
                       init="tiny", steps=3, batch_size=8, sequence_length=16, verbose=0)
    runs = summary["runs"]
    assert set(runs) == {"0.001", "1e-06"}
    best = max(runs, key=lambda r: runs[r]["dev"]["accuracy"])
    assert summary["best_learning_rate"] == float(best)
    assert json.loads((tmp_path / "metrics.json").read_text())["best_learning_rate"] == float(best)
