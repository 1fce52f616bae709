"""`finetune()`: the paper's fine-tuning recipe on one task, end to end, in one call.

This is what `kbert finetune` and the notebooks call. It reads the task, builds the model on a
pretrained or randomly initialised backbone, trains with `model.fit` (AdamW, 10% warmup, linear
decay, a progress bar, TensorBoard logs in OUTPUT/logs/), scores dev and test (when the task
has one) with `kbert.evaluation`, writes OUTPUT/metrics.json and saves OUTPUT/model.keras with
the vocabulary next to it (OUTPUT/vocab.txt).

`lr_sweep()` repeats it over the paper's learning rates and keeps the best on dev.
"""

import json
import math
import os
import pathlib
import time

import keras
import numpy as np

from kbert.config import PRESETS, BertConfig
from kbert.data.tasks import Task, load_task, make_dataset
from kbert.evaluation.classification import (
    accuracy,
    classification_metrics,
    regression_metrics,
)
from kbert.training.optimizer import make_optimizer
from kbert.training.precision import dtype_policy, needs_loss_scale
from kbert.training.runs import parameter_counts, save_model_and_tokenizer, subset

MODES = ("finetune", "feature")
XLA_PAD_MULTIPLE = 16
"""With `xla=True`, batches are padded to a multiple of this (8 shapes up to length 128):
XLA compiles one program per input shape."""
EVAL_SEED = 1234  # fixed, so that every run scores the same eval subset


def build_backbone(init, dtype=None):
    """(backbone, tokenizer) for `init`, computing under the Keras dtype policy `dtype`:

    * a checkpoint directory or weights preset ("minilm_l6_h384_uncased"): pretrained weights
      and that checkpoint's vocabulary;
    * a size preset ("tiny", "mini", "small", "medium", "base", "large"): random weights, with
      the uncased BERT vocabulary of MiniLM (the standard 30,522 tokens);
    * "random:<checkpoint or weights preset>": that checkpoint's shape and vocabulary, random
      weights (the from-scratch baseline of the same model).
    """
    from kbert.models.backbone import BertBackbone
    from kbert.presets import resolve
    from kbert.text import BertTokenizer

    if init in PRESETS:
        vocabulary = resolve("minilm_l6_h384_uncased")
        return (BertBackbone(BertConfig.preset(init), dtype=dtype),
                BertTokenizer.from_pretrained(vocabulary))
    if isinstance(init, str) and init.startswith("random:"):
        from kbert.convert import read_checkpoint

        path = resolve(init.split(":", 1)[1])
        config, _ = read_checkpoint(path)
        return BertBackbone(config, dtype=dtype), BertTokenizer.from_pretrained(path)
    path = resolve(init)
    return BertBackbone.from_pretrained(path, dtype=dtype), BertTokenizer.from_pretrained(path)


def build_model(task: Task, backbone, mode="finetune", dropout=0.1):
    """The task's model on `backbone`: `BertClassifier` (classification, regression),
    `BertMultipleChoice`, or with mode="feature" a BiLSTM classifier on frozen features."""
    from kbert.models.classifier import BertClassifier
    from kbert.models.feature_extractor import BertFeatureExtractor, feature_classifier
    from kbert.models.multiple_choice import BertMultipleChoice

    if mode == "feature":
        if task.kind != "classification":
            raise ValueError("mode='feature' supports classification tasks only.")
        layers = tuple(range(-min(4, backbone.config.num_layers), 0))
        return feature_classifier(BertFeatureExtractor(backbone, layers), task.num_classes,
                                  dropout=dropout)
    if task.kind == "multiple_choice":
        return BertMultipleChoice(backbone, num_choices=task.num_classes, dropout=dropout)
    return BertClassifier(backbone, num_classes=task.num_classes, dropout=dropout)


def predict(model, examples, preprocessor, kind, batch_size=64):
    """Model outputs for `examples`, in order (logits, or scores for regression)."""
    dataset = make_dataset(examples, preprocessor, batch_size, kind)
    outputs = model.predict(dataset.map(lambda x, y: x), verbose=0)
    return outputs.reshape(-1) if kind == "regression" else outputs


def evaluate(model, examples, preprocessor, task: Task, batch_size=64):
    """The task's standard metrics on `examples` (see `kbert.evaluation`)."""
    outputs = predict(model, examples, preprocessor, task.kind, batch_size)
    labels = np.asarray([y for _, y in examples])
    if task.kind == "regression":
        return regression_metrics(labels, outputs)
    predictions = outputs.argmax(-1)
    if task.kind == "multiple_choice":
        return {"accuracy": accuracy(labels, predictions)}
    return classification_metrics(labels, predictions, task.num_classes)


def finetune(task="sentiment", init="minilm_l6_h384_uncased", output_dir="runs/finetune",
             epochs=3, steps=None, batch_size=32, sequence_length=128, learning_rate=None,
             max_train_examples=None, max_eval_examples=None, mode="finetune", data_dir=None,
             warmup_fraction=0.1, weight_decay=0.01, seed=0, verbose=1,
             attention_sentence=None, xla=False, mixed_precision=None):
    """Fine-tunes `init` on `task`, evaluates it, and saves metrics, logs and the model.

    Args:
      task: "sentiment", "sentiment_score", "qnli", "mmlu", "glue" / "glue:<TASK>" (with
        `data_dir`), or a `kbert.data.tasks.Task`.
      init: pretrained checkpoint dir or weights preset; a size preset name ("mini", ...) for a
        random init; "random:<checkpoint>" for a random init of that checkpoint's shape.
      output_dir: gets metrics.json, logs/ (TensorBoard), model.keras and vocab.txt.
      epochs, steps: train `steps` steps if given, else `epochs` passes over the train split.
      batch_size, sequence_length: per step; sequences are cut to the longest in each batch.
      learning_rate: peak rate (default 5e-5; 1e-3 with mode="feature", where only a small
        head trains). 10% linear warmup, then linear decay to 0 (`make_optimizer`).
      max_train_examples: train on a random subset of this size (chosen with `seed`).
      max_eval_examples: score at most this many dev / test examples (a fixed subset).
      mode: "finetune" (all weights) or "feature" (frozen BERT, last four layers'
        hidden states concatenated, a BiLSTM classifier on top).
      seed: seeds weight init, dropout, shuffling and the train subset.
      attention_sentence: a text whose attention heatmaps (one image per layer, heads tiled)
        go to TensorBoard in OUTPUT/logs/attention/ at the start, about ten times during
        training and at the end (`kbert.viz.AttentionImages`).
      xla: compile the train step with XLA; batch lengths are then rounded up to a multiple
        of `XLA_PAD_MULTIPLE`, so that it compiles a few programs, not one per length.
      mixed_precision: None (float32), "bf16" or "fp16" (with dynamic loss scaling); see
        `kbert.training.precision`. Weights stay float32.

    Returns the dict written to metrics.json: `dev` and `test` metric dicts (accuracy, f1,
    matthews_corrcoef; pearson, spearman for regression), the same final held-out numbers at
    the top level (test when the task has a test split, else dev; `eval_split` says which),
    and the run's settings, sizes and timings.
    """
    from kbert.text import BertPreprocessor

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    if steps is None and (epochs is None or epochs <= 0):
        raise ValueError("Give a positive number of epochs or steps.")
    if learning_rate is None:
        learning_rate = 1e-3 if mode == "feature" else 5e-5
    policy = dtype_policy(mixed_precision)
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)

    task = task if isinstance(task, Task) else load_task(task, data_dir)
    train = subset(task.splits["train"], max_train_examples, seed)
    held_out = {split: subset(task.splits[split], max_eval_examples, EVAL_SEED)
                for split in ("dev", "test") if task.splits.get(split)}

    backbone, tokenizer = build_backbone(init, dtype=policy)
    preprocessor = BertPreprocessor(tokenizer, sequence_length=sequence_length)
    model = build_model(task, backbone, mode)

    steps_per_epoch = math.ceil(len(train) / batch_size)
    if steps is not None:
        epochs, steps_per_epoch = 1, int(steps)
    total_steps = epochs * steps_per_epoch
    optimizer = make_optimizer(learning_rate, total_steps, warmup_fraction, weight_decay,
                               model=model, loss_scale=needs_loss_scale(policy))
    if mode == "feature":
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy("accuracy")],
                      jit_compile=xla)
    else:
        model.compile(optimizer=optimizer, jit_compile=xla)

    train_data = make_dataset(train, preprocessor, batch_size, task.kind, shuffle=True,
                              bucket=True, repeat=True, seed=seed,
                              pad_to_multiple_of=XLA_PAD_MULTIPLE if xla else 1)
    callbacks = [keras.callbacks.TensorBoard(log_dir=str(output_dir / "logs"),
                                             update_freq=max(1, min(50, total_steps // 20)))]
    if attention_sentence:
        from kbert.viz.tensorboard import AttentionImages

        callbacks.append(AttentionImages(output_dir / "logs" / "attention", backbone,
                                         preprocessor, attention_sentence,
                                         every=max(1, total_steps // 10)))
    start = time.perf_counter()
    history = model.fit(train_data, epochs=epochs, steps_per_epoch=steps_per_epoch,
                        callbacks=callbacks, verbose=verbose, shuffle=False)
    train_seconds = time.perf_counter() - start

    results = {}
    start = time.perf_counter()
    for split, examples in held_out.items():
        results[split] = evaluate(model, examples, preprocessor, task)
    eval_seconds = time.perf_counter() - start
    final_split = "test" if "test" in results else "dev"

    save_model_and_tokenizer(model, tokenizer, output_dir)
    metrics = {
        **results[final_split],
        "eval_split": final_split,
        **results,
        "task": task.name,
        "kind": task.kind,
        "init": str(init),
        "mode": mode,
        "settings": {"epochs": epochs, "steps": total_steps, "batch_size": batch_size,
                     "sequence_length": sequence_length, "learning_rate": learning_rate,
                     "warmup_fraction": warmup_fraction, "weight_decay": weight_decay,
                     "seed": seed, "xla": bool(xla), "mixed_precision": policy},
        "sizes": {"train": len(train), **{k: len(v) for k, v in held_out.items()},
                  **parameter_counts(backbone, model)},
        "final_train_loss": float(history.history["loss"][-1]),
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
    }
    with open(output_dir / "metrics.json", "w", encoding="utf-8") as f:
        json.dump(metrics, f, indent=2)
    return metrics


def evaluate_run(run_dir, task=None, split="test", data_dir=None, max_eval_examples=None,
                 batch_size=64):
    """Scores a `finetune()` output directory (model.keras, vocab.txt, metrics.json) on one
    split of `task` (default: the task it was trained on); returns the metrics."""
    from kbert.text import BertPreprocessor, BertTokenizer

    run_dir = pathlib.Path(run_dir)
    if not (run_dir / "model.keras").is_file():
        raise FileNotFoundError(f"{run_dir} holds no model.keras: give a `kbert finetune` "
                                "output directory.")
    trained = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    task = task if isinstance(task, Task) else load_task(task or trained["task"], data_dir)
    if not task.splits.get(split):
        raise ValueError(f"Task {task.name!r} has no {split!r} split; it has "
                         f"{sorted(k for k, v in task.splits.items() if v)}.")
    model = keras.saving.load_model(run_dir / "model.keras", compile=False, safe_mode=True)
    preprocessor = BertPreprocessor(BertTokenizer.from_pretrained(run_dir),
                                    sequence_length=trained["settings"]["sequence_length"])
    examples = subset(task.splits[split], max_eval_examples, EVAL_SEED)
    return {**evaluate(model, examples, preprocessor, task, batch_size), "split": split,
            "task": task.name, "examples": len(examples)}


def lr_sweep(task="sentiment", learning_rates=(5e-5, 4e-5, 3e-5, 2e-5),
             output_dir="runs/sweep", **kwargs):
    """`finetune` once per learning rate (into OUTPUT/lr_<rate>/) and keep the best on dev.

    The choice uses dev only (accuracy; pearson for regression); the chosen run's metrics,
    test included, are written to OUTPUT/metrics.json with `best_learning_rate` and every
    run's dev score (also returned).
    """
    output_dir = pathlib.Path(output_dir)
    runs, best = {}, None
    for rate in learning_rates:
        run_dir = output_dir / f"lr_{rate:g}"
        metrics = finetune(task=task, output_dir=run_dir, learning_rate=rate, **kwargs)
        key = "pearson" if metrics["kind"] == "regression" else "accuracy"
        runs[f"{rate:g}"] = {"dev": metrics["dev"], "output_dir": os.fspath(run_dir)}
        if best is None or metrics["dev"][key] > best[1]["dev"][key]:
            best = (rate, metrics)
    summary = {**best[1], "best_learning_rate": best[0],
               "best_output_dir": os.fspath(output_dir / f"lr_{best[0]:g}"), "runs": runs}
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / "metrics.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    return summary
