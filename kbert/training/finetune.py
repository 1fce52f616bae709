"""`finetune()`: the one fine-tuning driver. Every task (sentences, pairs, multiple choice,
SQuAD spans, CoNLL tags) is a `kbert.tasks.TaskSpec` that this driver runs the same way:

1. build the backbone (pretrained, or random from a size preset) and the task's model, which
   holds its preprocessor;
2. train with `model.fit` on the spec's tf.data pipeline: AdamW, 10% linear warmup then linear
   decay (`make_optimizer`), a progress bar, TensorBoard logs in OUTPUT/logs/;
3. score dev and test (where the task has one) with the spec's metrics;
4. save the run directory (`kbert.runs.RunDirectory`): model.keras with its preprocessor,
   run.json, metrics.json, predictions.json.

`kbert finetune`, the notebooks, `evaluate_run` and `lr_sweep` all go through here.
"""

import math
import os
import pathlib
import time

import keras

from kbert.atomic import removed_if_unfinished
from kbert.models.xla import pad_multiple
from kbert.outputs import MARKER, mark
from kbert.runs import RunDirectory
from kbert.tasks import EVAL_SEED, get_spec, subset
from kbert.tasks.pretrained import open_task_model, start_from_fine_tuned_head
from kbert.text.utf8 import without_lone_surrogates
from kbert.training import best_epoch
from kbert.training import finetune_checkpoints as resumable
from kbert.training.finetune_config import FinetuneConfig
from kbert.training.optimizer import make_optimizer
from kbert.training.optimizer import dtype_policy, needs_loss_scale

SENTENCE_KINDS = ("classification", "regression", "multiple_choice")


def build_backbone(init, dtype=None, attention="auto", allow_pickle=False, **rates):
    """(backbone, tokenizer) for `init` (see `FinetuneConfig.init`), from the preset registry,
    running the attention kernel `attention`, with the dropout `rates` given (by name)."""
    from kbert.models.pretrained import load_backbone_and_tokenizer

    return load_backbone_and_tokenizer(init, dtype=dtype, attention_implementation=attention,
                                       allow_pickle=allow_pickle, **rates)


def _fit(model, dataset, plan, initial_epoch, callbacks, verbose, validation=None):
    """(history or None when the run had no steps left, seconds): the plan's epochs from
    `initial_epoch` on, with the `validation` dataset's loss and metrics after each."""
    start = time.perf_counter()
    if initial_epoch >= plan.epochs:
        return None, 0.0
    history = model.fit(dataset, epochs=plan.epochs, steps_per_epoch=plan.steps_per_epoch,
                        initial_epoch=initial_epoch, callbacks=callbacks, verbose=verbose,
                        shuffle=False, validation_data=validation)
    return history, time.perf_counter() - start


def _callbacks(config, model, output_dir, total_steps):
    """TensorBoard: fit's training and validation curves (logs/train, logs/validation), the
    learning rate each step used, and optionally attention images."""
    from kbert.training.callbacks import LearningRateLog

    every = max(1, min(50, total_steps // 20))
    callbacks = [keras.callbacks.TensorBoard(log_dir=str(output_dir / "logs"), update_freq=every),
                 LearningRateLog(output_dir / "logs" / "train", every)]
    if config.attention_sentence:
        from kbert.viz.tensorboard import AttentionImages

        callbacks.append(AttentionImages(output_dir / "logs" / "attention", model.backbone,
                                         model.preprocessor, config.attention_sentence,
                                         every=max(1, total_steps // 10)))
    return callbacks


def finetune(task="sentiment", data_dir=None, config=None, task_options=None, **settings):
    """Fine-tunes a BERT model on a task, evaluates it, and saves the run directory.

    The run's settings (`init`, `output_dir`, `epochs` or `steps`, `batch_size`,
    `learning_rate`, `mode`, ...) are the fields of `FinetuneConfig`
    (`kbert.training.finetune_config`), given as keywords or as one `config`. The output folder
    follows `kbert.outputs`' rule: a folder holding a finished run is replaced only with
    `overwrite=True`, and then only once the new run is complete. Rerun after a kill, a run
    resumes from its last checkpoint; a failed run leaves no folder it created that holds
    nothing to resume from.

    Args:
      task: a task name as `kbert finetune --task` takes it ("sentiment", "squad", "conll2003",
        "glue:sst-2", ...), one's own files as a `kbert.data.own_files.DataFiles` (e.g.
        `DataFiles("reviews.csv", text_column="review", label_column="sentiment")`), a
        `kbert.data.tasks.TaskData` or a `kbert.tasks.TaskSpec`.
      data_dir: the folder of the task's data files, for tasks read from disk (GLUE, or a
        local copy of a task's data); None fetches the task's own data (cached).
      config: a `FinetuneConfig` holding every setting; `settings` must then be empty.
      task_options: keyword arguments for the task's spec (e.g. SQuAD's `doc_stride`).
      **settings: the fields of `FinetuneConfig`, when no `config` is given.

    Returns:
      The dict written to OUTPUT/metrics.json: the final held-out metrics at the top level
      (the test split's when the task has one, else dev's; `eval_split` names it), the `dev`
      and `test` metric dicts, the run's `task`, `kind`, `init`, `mode`, `settings` and
      `sizes`, `final_train_loss`, `optimizer_steps`, `resumed_from_step` (None for an
      uninterrupted run), `train_seconds` and `eval_seconds`; with `keep_best`, also
      `best_epoch` and `dev_scores`. The folder holds model.keras (the model with its
      preprocessor), run.json, metrics.json, TensorBoard logs in logs/ and, for tasks that
      keep them, predictions.json.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> output_dir = tempfile.mkdtemp()
        >>> metrics = kbert.finetune(task="sentiment", init="tiny", steps=2, batch_size=8,
        ...                          sequence_length=32, max_train_examples=16,
        ...                          max_eval_examples=16, output_dir=output_dir, verbose=0)
        >>> metrics["eval_split"], metrics["optimizer_steps"], metrics["sizes"]["train"]
        ('test', 2, 16)
        >>> sorted(metrics["test"])
        ['accuracy', 'f1', 'matthews_corrcoef']
        >>> sorted(p.name for p in pathlib.Path(output_dir).iterdir() if not p.name.startswith("."))
        ['logs', 'metrics.json', 'model.keras', 'run.json']
    """
    config = config or FinetuneConfig(**settings)
    if data_dir is not None:  # run.json keeps it: `kbert evaluate` may run from elsewhere
        data_dir = os.path.abspath(data_dir)
    output_dir = pathlib.Path(config.output_dir)
    work = resumable.working_folder(output_dir, config.overwrite, (config.init, data_dir))
    if work != output_dir and RunDirectory.is_run(work):  # complete, killed before its swap
        resumable.swap_in(work, output_dir)
        return RunDirectory(output_dir).metrics
    with removed_if_unfinished(work, disposable=("logs", MARKER)):
        metrics = _finetune(task, data_dir, config, task_options, work)
    if work != output_dir:
        resumable.swap_in(work, output_dir)
    return metrics


def _finetune(task, data_dir, config, task_options, output_dir):
    """`finetune`'s work, written to `output_dir` (the run, or its replacement's staging)."""
    spec = _checked_spec(get_spec(task, data_dir, **(task_options or {})), config)
    policy = dtype_policy(config.mixed_precision)
    keras.utils.set_random_seed(config.seed)
    splits = spec.splits()
    train = subset(splits["train"], config.max_train_examples, config.seed)
    held_out = {name: subset(splits[name], config.max_eval_examples, EVAL_SEED)
                for name in ("dev", "test") if splits.get(name)}

    backbone, tokenizer = build_backbone(config.init, dtype=policy, attention=config.attention,
                                         allow_pickle=config.allow_pickle,
                                         **config.dropout_rates)
    sequence_length = config.sequence_length or spec.sequence_length
    model = spec.build(backbone, tokenizer, sequence_length, config.mode)
    start_from_fine_tuned_head(model, config.init, spec.info().get("label_names"),
                               config.allow_pickle)
    plan = resumable.plan_steps(config, None if config.steps else max(
        1, math.ceil(spec.train_size(train, model) / config.batch_size)))
    total_steps = plan.total_steps
    model.compile(optimizer=make_optimizer(config.peak_learning_rate, total_steps,
                                           config.warmup_fraction, config.weight_decay,
                                           model=model, loss_scale=needs_loss_scale(policy)),
                  jit_compile=config.xla)
    mark(output_dir, "finetune")
    record = resumable.run_record(config, spec, sequence_length, plan)
    state = resumable.resume(output_dir, model, record, plan,
                             restart_on_mismatch=output_dir != pathlib.Path(config.output_dir))
    if state is None:
        best_epoch.clear(output_dir)  # a fresh start: scores of an earlier attempt are stale
    # A resumed attempt draws a fresh data order from its start step (as pre-training does).
    dataset = spec.train_dataset(model, train, config.batch_size,
                                 config.seed + (state["step"] if state else 0),
                                 pad_multiple(model))
    validation = (spec.validation_dataset(model, held_out["dev"], config.batch_size)
                  if config.validates and "dev" in held_out else None)
    keep_best = [best_epoch.KeepBest(output_dir, lambda: spec.evaluate(
        model, held_out["dev"])[0][spec.metric], spec.metric)] if config.keep_best else []
    history, train_seconds = _fit(
        model, dataset, plan, state["epoch"] if state else 0,
        # The best epoch's score first (TensorBoard logs it), before the epoch's checkpoint.
        keep_best + _callbacks(config, model, output_dir, total_steps)
        + resumable.checkpoint_callbacks(output_dir, record, plan), config.verbose, validation)
    best = best_epoch.restore_best(output_dir, model) if config.keep_best else None

    start = time.perf_counter()
    results, predictions = {}, {}
    for name, examples in held_out.items():
        results[name], predictions[name] = spec.evaluate(model, examples)
    settings = {**config.settings(spec, sequence_length, total_steps),
                "xla": bool(model.xla_modes.get("train", model.jit_compile)),  # what trained
                "causal": bool(backbone.causal)}  # a left-to-right init stays left-to-right
    sizes = {"train": len(train), **{k: len(v) for k, v in held_out.items()},
             "backbone_parameters": int(backbone.count_params()),
             "model_parameters": int(model.count_params()),  # backbone + task head
             "trainable_parameters": int(sum(math.prod(v.shape)
                                             for v in model.trainable_weights))}
    metrics = {**_run_metrics(spec, config, results, settings, sizes,
                              resumable.final_train_loss(history, state), train_seconds,
                              time.perf_counter() - start),
               **resumable.step_counts(model, state)}
    if best is not None:
        metrics.update(best_epoch=best[0], dev_scores=best[1])
    info = {"task": spec.name, "kind": spec.kind, "settings": settings, **spec.info()}
    kept = {k: v for k, v in predictions.items() if v is not None}
    RunDirectory(output_dir).save(model, info, metrics, kept or None)
    resumable.remove_checkpoints(output_dir)
    best_epoch.clear(output_dir)
    return metrics


def _checked_spec(spec, config):
    """The spec, once the settings fit it and the model: the mode, attention images, and a
    sequence length within the model's positions (read from its config, before any weight
    is built or data read)."""
    from kbert.presets import resolve_preset

    resolve_preset(config.init).config.check_sequence_length(
        config.sequence_length or spec.sequence_length)
    if config.mode not in spec.modes:
        raise ValueError(f"Task {spec.name!r} supports mode {' or '.join(spec.modes)}, "
                         f"not {config.mode!r}.")
    if config.attention_sentence and spec.kind not in SENTENCE_KINDS:
        raise ValueError(f"Attention images work with sentence and pair tasks, not with "
                         f"{spec.name}.")
    return spec


def _run_metrics(spec, config, results, settings, sizes, final_loss, train_seconds,
                 eval_seconds):
    """What metrics.json holds: the final held-out metrics on top (test if there is one)."""
    final = "test" if "test" in results else "dev"
    return {**results[final], "eval_split": final, **results,
            "task": spec.name, "kind": spec.kind, "init": str(config.init), "mode": config.mode,
            "settings": settings, "sizes": sizes,
            "final_train_loss": None if final_loss is None else float(final_loss),
            "train_seconds": round(train_seconds, 1), "eval_seconds": round(eval_seconds, 1)}


def evaluate_run(path, task=None, split=None, data_dir=None, max_eval_examples=None,
                 batch_size=64, allow_pickle=False, return_predictions=False,
                 null_threshold=None):
    """Scores a run directory, or a checkpoint directory holding a fine-tuned head
    (transformers, keras-hub, Google's scripts), on one split of `task` (default for a run: the
    task it was trained on, with the data directory and options it was trained with; a
    checkpoint names no task, so it needs one); returns the metrics, or with
    `return_predictions` (metrics, predictions): for SQuAD the official scripts' {question id:
    answer}, for CoNLL each sentence's words, gold and predicted tags, else None.
    `null_threshold`: SQuAD v2.0's, in place of the run's (`with_null_threshold`)."""
    spec, model = open_task_model(path, task, data_dir, allow_pickle, null_threshold,
                                  with_data=True)
    split = split or ("test" if spec.splits().get("test") else "dev")
    if not spec.splits().get(split):
        raise ValueError(f"Task {spec.name!r} has no {split!r} split; it has "
                         f"{sorted(k for k, v in spec.splits().items() if v)}.")
    examples = subset(spec.splits()[split], max_eval_examples, EVAL_SEED)
    metrics, predictions = spec.evaluate(model, examples, batch_size)
    metrics = {**metrics, "split": split, "task": spec.name, "examples": len(examples)}
    return (metrics, predictions) if return_predictions else metrics


def predict_run(path, allow_pickle=False, task=None, data_dir=None, null_threshold=None,
                top_k=None, **inputs):
    """`kbert predict`: the model of a run or fine-tuned checkpoint on raw input (text; text +
    text_pair; question + context; text + choices; text with blanks for a masked LM), answered
    by its task's spec (`open_task_model`)."""
    spec, model = open_task_model(path, task, data_dir, allow_pickle, null_threshold,
                                  top_k=top_k)
    return spec.predict(model, **{k: without_lone_surrogates(v) for k, v in inputs.items()})
