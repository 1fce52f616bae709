"""`KeepBest`: fine-tuning that ends with the weights of its best epoch on dev (`kbert finetune
--keep-best`), as Hugging Face's Trainer does with `load_best_model_at_end` and the Model
Garden with its best checkpoint.

After every Keras epoch (a real epoch; with `steps`, a checkpoint's chunk of steps) the task's
own dev metric is computed (`TaskSpec.evaluate`: SQuAD's F1 after decoding, not a proxy) and
appended to OUTPUT/best/scores.json; a better score than every earlier one replaces
OUTPUT/best/weights/ whole (`atomic_directory`). The callback runs before the epoch's checkpoint
is saved, so a killed run that resumes from that checkpoint has scored every epoch it skips.
"""

import json
import math
import os
import pathlib
import shutil

import keras

from kbert.atomic import atomic_directory

BEST = "best"
SCORES = "scores.json"
WEIGHTS = "weights"
WEIGHTS_FILE = "model.weights.h5"


class KeepBest(keras.callbacks.Callback):
    """Scores the model with `score()` (higher is better) at every epoch end and keeps the
    best epoch's weights under `output_dir/best/`. The score joins the epoch's logs as
    `val_<metric>` (unless Keras' validation pass already put one there), so that the
    callbacks after this one (TensorBoard, History, the progress bar) report it, as Keras'
    ReduceLROnPlateau adds its learning rate."""

    def __init__(self, output_dir, score, metric):
        super().__init__()
        self.directory = pathlib.Path(output_dir) / BEST
        self.score = score
        self.metric = metric

    def on_epoch_end(self, epoch, logs=None):
        epoch += 1  # Keras counts from 0; checkpoints and metrics.json from 1
        value = float(self.score())
        if logs is not None:
            logs.setdefault(f"val_{self.metric}", value)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Scores of this epoch or later come from an attempt that was killed: redone now.
        scores = [s for s in read_scores(self.directory.parent) if s["epoch"] < epoch]
        if not math.isnan(value) and value > max((s["score"] for s in scores), default=-math.inf):
            with atomic_directory(self.directory / WEIGHTS, owned_files=(WEIGHTS_FILE,)) as stage:
                self.model.save_weights(stage / WEIGHTS_FILE)
        scores.append({"epoch": epoch, "score": value})
        staging = self.directory / f".{SCORES}.tmp"
        staging.write_text(json.dumps(scores, indent=2) + "\n")
        os.replace(staging, self.directory / SCORES)


def read_scores(output_dir):
    """[{"epoch", "score"}] of the epochs scored so far (none before the first)."""
    path = pathlib.Path(output_dir) / BEST / SCORES
    return json.loads(path.read_text()) if path.is_file() else []


def restore_best(output_dir, model):
    """Loads the best epoch's weights into `model`; returns (its epoch, every epoch's score),
    or None when no epoch was scored."""
    scores = read_scores(output_dir)
    if not scores:
        return None
    model.load_weights(pathlib.Path(output_dir) / BEST / WEIGHTS / WEIGHTS_FILE)
    best = max(scores, key=lambda s: (s["score"], -s["epoch"]))  # ties: the earlier epoch
    return best["epoch"], scores


def clear(output_dir):
    """Removes the best epoch's files: once the run directory holds the model, or before a
    fresh start."""
    shutil.rmtree(pathlib.Path(output_dir) / BEST, ignore_errors=True)
