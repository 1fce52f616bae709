"""What fine-tuning runs share: fixed subsets, step counts, fit with TensorBoard logs, and the
files a saved span or tagging run holds."""

import json
import math
import random
import time
import warnings

import keras


def subset(examples, limit, seed):
    if limit is None or limit >= len(examples):
        return list(examples)
    return random.Random(seed).sample(list(examples), limit)


def steps_and_epochs(count, batch_size, epochs, steps):
    if steps is None and (epochs is None or epochs <= 0):
        raise ValueError("Give a positive number of epochs or steps.")
    if steps is not None:
        return 1, int(steps)
    return int(epochs), max(1, math.ceil(count / batch_size))


def fit_with_logs(model, dataset, epochs, steps_per_epoch, output_dir, verbose):
    total = epochs * steps_per_epoch
    callbacks = [keras.callbacks.TensorBoard(log_dir=str(output_dir / "logs"),
                                             update_freq=max(1, min(50, total // 20)))]
    start = time.perf_counter()
    with warnings.catch_warnings():
        # The pooler is unused by span and token heads, so it gets no gradient: expected.
        warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables "
                                r"\['pooler/kernel', 'pooler/bias'\]")
        history = model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
                            callbacks=callbacks, verbose=verbose, shuffle=False)
    return history, time.perf_counter() - start


def parameter_counts(backbone, model):
    """The sizes a run's metrics.json reports: all backbone weights, and what training updates."""
    return {"parameters": int(backbone.count_params()),
            "trainable_parameters": int(sum(math.prod(v.shape) for v in model.trainable_weights))}


def save_model_and_tokenizer(model, tokenizer, output_dir):
    """model.keras, and the tokenizer as `BertTokenizer.from_pretrained(output_dir)` reads it
    back: vocab.txt and its casing in kbert_tokenizer.json."""
    model.save(output_dir / "model.keras")
    (output_dir / "vocab.txt").write_text("\n".join(tokenizer.get_vocabulary()) + "\n",
                                          encoding="utf-8")
    (output_dir / "kbert_tokenizer.json").write_text(
        json.dumps({"lowercase": tokenizer.lowercase}) + "\n", encoding="utf-8")


def save_run(model, tokenizer, output_dir, task_info, metrics, predictions):
    save_model_and_tokenizer(model, tokenizer, output_dir)
    task_info = {**task_info, "lowercase": tokenizer.lowercase}
    for name, value in (("task.json", task_info), ("metrics.json", metrics),
                        ("predictions.json", predictions)):
        with open(output_dir / name, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
