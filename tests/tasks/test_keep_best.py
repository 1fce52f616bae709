"""`kbert finetune --keep-best`: the run ends with the weights of its best epoch on dev."""

import json

import keras
import pytest

from kbert.training import best_epoch, finetune_checkpoints
from kbert.training.finetune import evaluate_run, finetune


@pytest.mark.slow
def test_the_run_keeps_its_best_epochs_weights(tmp_path):
    """Three epochs of MiniLM on 32 reviews at a high rate: dev accuracy falls after the first
    (seed 0), and the saved run, scored again in this process, has the first epoch's score."""
    from tests.pretraining.test_pretrain import event_scalars
    from tests.test_cli_processes import KBERT, run

    output = tmp_path / "run"
    out, _ = run(KBERT + ["finetune", "--task", "sentiment", "--epochs", "3", "--batch-size",
                          "8", "--max-train-examples", "32", "--max-eval-examples", "32",
                          "--sequence-length", "32", "--learning-rate", "2e-4", "--seed", "0",
                          "--keep-best", "--output", output])
    metrics = json.loads((output / "metrics.json").read_text())
    scores = [s["score"] for s in metrics["dev_scores"]]
    # One dev pass an epoch, --keep-best's: no Keras validation loss, and its score is what
    # TensorBoard's validation run shows.
    assert metrics["settings"]["validate"] is False
    logged = event_scalars(output / "logs" / "validation")
    assert "epoch_loss" not in logged
    assert [value for _, value in logged["epoch_accuracy"]] == pytest.approx(scores)
    assert [s["epoch"] for s in metrics["dev_scores"]] == [1, 2, 3]
    assert metrics["best_epoch"] == scores.index(max(scores)) + 1
    assert scores[-1] < max(scores)  # the last epoch is not the best: keeping it matters
    assert f"kept epoch {metrics['best_epoch']} of 3" in out
    assert metrics["dev"]["accuracy"] == pytest.approx(max(scores))
    assert evaluate_run(output, split="dev", max_eval_examples=32)["accuracy"] == \
        pytest.approx(max(scores))
    assert not (output / best_epoch.BEST).exists()


class Crash(keras.callbacks.Callback):
    """Fails at the end of Keras epoch `epoch` (after its checkpoint is saved)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("crash")


@pytest.mark.slow
def test_a_resumed_run_keeps_the_scores_of_the_epochs_before_the_crash(tmp_path, monkeypatch):
    settings = dict(task="sentiment", init="tiny", output_dir=str(tmp_path / "run"), epochs=3,
                    batch_size=8, max_train_examples=16, max_eval_examples=8,
                    sequence_length=16, keep_best=True, validate=False, verbose=0)
    callbacks = finetune_checkpoints.checkpoint_callbacks
    monkeypatch.setattr(finetune_checkpoints, "checkpoint_callbacks",
                        lambda *args: callbacks(*args) + [Crash(1)])
    with pytest.raises(RuntimeError, match="crash"):
        finetune(**settings)
    before = best_epoch.read_scores(tmp_path / "run")
    assert [s["epoch"] for s in before] == [1, 2]

    monkeypatch.undo()
    metrics = finetune(**settings)
    assert metrics["resumed_from_step"] == 4
    assert metrics["dev_scores"][:2] == before and len(metrics["dev_scores"]) == 3
    scores = [s["score"] for s in metrics["dev_scores"]]
    assert metrics["best_epoch"] == scores.index(max(scores)) + 1
