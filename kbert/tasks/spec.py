"""`TaskSpec`: what one fine-tuning task tells the one driver (`kbert.training.finetune`).

A task is backbone + preprocessor + head, plus this small spec: where its examples come from,
how to build its model, its training dataset, how to score a split and how to answer raw
input. The driver, `kbert evaluate`, `kbert predict` and `from_pretrained` only talk to specs,
so a new task is a new spec, never a new driver.
"""

import random

EVAL_SEED = 1234  # fixed, so that every run and every `kbert evaluate` scores the same subset


def subset(examples, limit, seed):
    """A fixed random subset of `limit` examples (all of them when `limit` is None)."""
    if limit is not None and limit < 1:
        raise ValueError(f"An example limit must be positive, got {limit}.")
    if limit is None or limit >= len(examples):
        return list(examples)
    return random.Random(seed).sample(list(examples), limit)


class TaskSpec:
    """The interface the driver runs. Subclasses set `name`, `kind`, `sequence_length` (the
    default packed length) and `metric` (the dev metric that picks among runs)."""

    name = "task"
    kind = "classification"
    sequence_length = 128
    metric = "accuracy"
    modes = ("finetune",)

    def splits(self) -> dict:
        """{"train", "dev"[, "test"]} → lists of examples."""
        raise NotImplementedError

    def build(self, backbone, tokenizer, sequence_length, mode="finetune"):
        """The task model on `backbone`, holding its preprocessor."""
        raise NotImplementedError

    def train_dataset(self, model, examples, batch_size, seed, pad_to_multiple_of=1):
        """An endless, shuffled tf.data of packed training batches."""
        raise NotImplementedError

    def validation_dataset(self, model, examples, batch_size):
        """One ordered pass over held-out `examples` in the training batches' form (inputs and
        targets), for the validation loss `fit` reports each epoch."""
        raise NotImplementedError

    def train_size(self, examples, model) -> int:
        """How many rows one epoch of `examples` trains on (windows for SQuAD)."""
        return len(examples)

    def evaluate(self, model, examples, batch_size=64):
        """(metrics, predictions) on `examples`; predictions are JSON-able, or None."""
        raise NotImplementedError

    def predict(self, model, **inputs):
        """Answers for raw input (`kbert predict`), JSON-able."""
        raise NotImplementedError

    def info(self) -> dict:
        """What the run directory keeps about the task (label names, task options)."""
        return {}
