"""`TaskSpec`: what one fine-tuning task tells the one driver (`kbert.training.finetune`).

A task is backbone + preprocessor + head, plus this small spec: where its examples come from,
how to build its model, its training dataset, how to score a split and how to answer raw
input. The driver, `kbert evaluate`, `kbert predict` and `from_pretrained` only talk to specs,
so a new task is a new spec, never a new driver.
"""

import random

from kbert import models

EVAL_SEED = 1234  # fixed, so that every run and every `kbert evaluate` scores the same subset


def sequence_predictions(model, features, batch_size=64, fill=0.0):
    """`model.predict_on_batch` over packed `features` in batches of similar lengths
    (`length_order`) cut to their longest row: each output's sequence axis padded back with
    `fill`, its rows in `features`' order (an array, or a dict for a model with several)."""
    import keras
    import numpy as np

    from kbert.config import INPUT_KEYS
    from kbert.models.xla import pad_multiple
    from kbert.text.datasets import length_order, packed_batches

    length = features["token_ids"].shape[1]
    longest = int(np.max(np.sum(features["padding_mask"], axis=1), initial=0))
    positions = model.backbone.config.max_position_embeddings
    if longest > positions:  # a checkpoint's span model gets SQuAD's 384 whatever its size
        raise ValueError(f"An input of {longest} tokens is longer than the model's {positions} "
                         f"positions (max_position_embeddings): pack at most {positions} (the "
                         "preprocessor's sequence_length).")
    order = length_order(features["padding_mask"])
    batches = packed_batches({k: features[k][order] for k in INPUT_KEYS}, batch_size,
                             pad_multiple(model))
    model.match_xla_to(batches, "predict", steps=len(batches))

    def padded(output):
        output = np.asarray(output, "float32")
        widths = [(0, 0), (0, length - output.shape[1])] + [(0, 0)] * (output.ndim - 2)
        return np.pad(output, widths, constant_values=fill)

    outputs = [keras.tree.map_structure(padded, model.predict_on_batch(x)) for x in batches]
    back = np.argsort(order)
    return keras.tree.map_structure(lambda *parts: np.concatenate(parts)[back], *outputs)


def label_order(model_names, task_names):
    """The model's output index for each of `task_names`, when `model_names` name the same
    labels in any order or case (transformers' run_glue.py matches `label2id` to a dataset's
    labels so); None when they name other labels."""
    ids = {str(name).lower(): i for i, name in enumerate(model_names)}
    if sorted(ids) != sorted(str(n).lower() for n in task_names):
        return None
    return [ids[str(name).lower()] for name in task_names]


def head_in_task_order(kernel, bias, model_names, task_names, owner="The model"):
    """A Dense head's weights with its outputs in the order of `task_names` when `model_names`
    name the same labels (`label_order`); unchanged, with a warning, when they name others:
    the model's label ids are then taken as the task's (run_glue.py's rule)."""
    import warnings

    order = label_order(model_names, task_names)
    if order is None:
        warnings.warn(f"{owner}'s labels {list(model_names)} are not the task's "
                      f"{list(task_names)}: its label ids are taken as the task's.", stacklevel=3)
        return kernel, bias
    return kernel[:, order], bias[order]


def subset(examples, limit, seed):
    """A fixed random subset of `limit` examples (all of them when `limit` is None)."""
    if limit is not None and limit < 1:
        raise ValueError(f"An example limit must be positive, got {limit}.")
    if limit is None or limit >= len(examples):
        return list(examples)
    return random.Random(seed).sample(list(examples), limit)


def refuse_unread(task_name, inputs):
    """Raises ValueError naming the inputs (given, not None) that a task's model does not
    read: `kbert predict` dropped a sentiment model's --choice and a SQuAD model's --text
    silently, answering as if they had not been given."""
    given = sorted(key for key, value in inputs.items() if value is not None)
    if given:
        raise ValueError(f"A {task_name} model does not read {', '.join(given)}.")


class TaskSpec:
    """The interface the driver runs. Subclasses set `name`, `kind`, `sequence_length` (the
    default packed length) and `metric` (the dev metric that picks among runs)."""

    name = "task"
    kind = "classification"
    sequence_length = 128
    metric = "accuracy"
    modes = ("finetune",)
    model_classes = (models.BertClassifier,)  # the task model classes whose head fits it

    def fit_to(self, model, label_names=None):
        """Checks that `model`'s head fits this task, so that a model trained elsewhere or for
        another task is refused by name rather than scored on outputs that mean something
        else; subclasses also take what the model fixes (its tag order, its named labels).
        `label_names`: the model's class names in id order, where its checkpoint has them."""
        if not isinstance(model, self.model_classes):
            takes = " or ".join(cls.__name__ for cls in self.model_classes)
            raise ValueError(f"Task {self.name!r} takes a {takes}; "
                             f"the model is a {type(model).__name__}.")

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
