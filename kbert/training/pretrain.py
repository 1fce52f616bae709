"""`pretrain()`: BERT pre-training (masked LM + next sentence prediction) end to end, resumable.

What `kbert pretrain` calls, with the settings of a `PretrainConfig`
(`kbert.training.pretrain_config`). One call runs these steps:

1. reads the corpus — the built-in Wikipedia text, the user's text files (see
   `kbert.data.pretraining.documents`), or a folder of TFRecord shards written by
   `kbert.data.pretraining.write_tfrecords` — and holds out whole documents (for TFRecords: the
   last shard, shards being disjoint sets of documents) for evaluation;
2. builds a `BertPretrainer` on a fresh backbone of `preset` (or on the weights of `init`, and
   its masked-LM and next-sentence heads where it has them; both through `kbert.presets`), in
   the strategy's scope (`kbert.training.distribution`; on JAX, `keras.distribution` over the
   whole run: `kbert.training.jax_distribution`), with the dtype policy for mixed precision;
3. compiles it with AdamW or LAMB (`kbert.optimizers`, `kbert.training.optimizer`): linear
   warmup then linear (or polynomial) decay over the optimizer steps, weight decay 0.01 except on
   LayerNorm and biases, global-norm clipping, optional gradient accumulation and XLA;
4. trains with plain `model.fit`: dynamic masking (fresh masks every epoch), TensorBoard logs in
   OUTPUT/logs/ (`steps/`: per-step MLM/NSP loss and accuracy, learning rate, sequences/s;
   `train/`: Keras' epoch summaries and, on request, a profiler trace), a checkpoint every
   `checkpoint_every` optimizer steps in OUTPUT/checkpoints/step-N/; rerunning the same call
   after a crash resumes from the newest usable one and ends at the same step count on the
   same schedule (`kbert.training.pretrain_checkpoints`);
5. scores the held-out documents before (fresh runs) and after training and writes
   OUTPUT/metrics.json: `mlm_accuracy`, `nsp_accuracy`, their losses, the most-frequent-token
   baseline (`baseline_mlm_accuracy`: always predicting the training data's most frequent
   token), the start values and, with `init`, `init_heads` (the heads taken from it); the
   trained model goes to OUTPUT/model/ as a Hugging Face directory (backbone + MLM/NSP heads
   + vocab.txt), which `kbert finetune --init` and `kbert pretrain --init` read.

Step accounting: `steps` counts optimizer updates; with `gradient_accumulation_steps=k` each one
consumes k batches of `batch_size` (an effective batch of k·batch_size), and the schedule runs
over updates. Under float16 a step skipped for overflowing gradients (its update is zero, the
loss scale halves) counts as a step. `epochs` is converted to steps from the number of pairs
one pass over the training documents makes.
"""

import json
import pathlib
import tempfile
import time

import numpy as np

from kbert import outputs
from kbert.atomic import removed_if_unfinished
from kbert.training.optimizer import needs_loss_scale
from kbert.training.pretrain_config import PretrainConfig, default_max_predictions
from kbert.training.pretrain_checkpoints import plan_steps, resume, run_record
from kbert.training.pretrain_data import finish, most_frequent_baseline, pretraining_data

__all__ = ["PretrainConfig", "pretrain", "default_max_predictions"]


OWNED = ("metrics.json", "start_metrics.json", "model", "logs", "checkpoints")
"""What a pre-training run writes in its folder."""


def pretrain(output_dir=None, config=None, **kwargs):
    """Pre-trains BERT (masked LM and next sentence prediction) and saves the run's folder.

    The run's settings (`preset` or `init`, `corpus`, `steps` or `epochs`, `batch_size`,
    `sequence_length`, `learning_rate`, ...) are the fields of `PretrainConfig`
    (`kbert.training.pretrain_config`), given as keywords or as one `config`. The output
    folder follows `kbert.outputs`' rule: with `overwrite=True` the new run trains beside the
    old one and replaces it once complete. Rerunning the same call resumes from the newest
    checkpoint; on a finished run it changes nothing. A run that fails before its first
    checkpoint leaves no output folder behind.

    Args:
      output_dir: the run's folder (`PretrainConfig.output_dir`); omit it when `config` is a
        `PretrainConfig`.
      config: a `PretrainConfig` holding every setting (then give nothing else), or a
        `kbert.BertConfig`: the shape of the fresh model (the `bert_config` field).
      **kwargs: the other fields of `PretrainConfig`.

    Returns:
      The dict written to OUTPUT/metrics.json: the held-out `mlm_accuracy`, `nsp_accuracy`
      and their losses (`mlm_loss`, `nsp_loss`, `loss`), `baseline_mlm_accuracy` (always
      predicting the most frequent training token, `most_frequent_token`), `start` (the
      scores before training), `steps`, `resumed_from_step`, `examples_seen`,
      `sequences_per_second`, `heldout_examples`, `train_examples_per_pass`, `weights_sha256`,
      `replicas`, `multi_worker`, `train_seconds`, `run` (the settings that define the run) and,
      with `init`, `init_heads`. With `save_model` (the default) the trained model is in
      OUTPUT/model/ as a Hugging Face directory with its heads and vocab.txt, which
      `finetune(init=...)` reads.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> output_dir = pathlib.Path(tempfile.mkdtemp())
        >>> metrics = kbert.pretrain(output_dir, preset="tiny", steps=2, batch_size=4,
        ...                          sequence_length=32, heldout_documents=2, eval_examples=8,
        ...                          checkpoint_every=0, verbose=0)
        >>> metrics["steps"], metrics["examples_seen"], 0 <= metrics["mlm_accuracy"] <= 1
        (2, 8, True)
        >>> sorted(p.name for p in (output_dir / "model").iterdir())
        ['config.json', 'model.safetensors', 'tokenizer_config.json', 'vocab.txt']
    """
    config = _as_config(output_dir, config, kwargs)
    target = pathlib.Path(config.output_dir)
    status = outputs.check_output(target, "pretrain", config.overwrite, _inputs(config))
    work = outputs.working_folder(target, "pretrain", status, config.overwrite, OWNED)
    with removed_if_unfinished(work, disposable=("logs", outputs.MARKER)) as output:
        outputs.mark(output, "pretrain")
        result = _pretrain(config, output)
    if work != target:
        outputs.swap_in(work, target, lambda entry: entry.name in OWNED)
    return result


def _inputs(config):
    """The paths a run reads, which its output may not replace."""
    corpus = config.corpus if isinstance(config.corpus, (list, tuple)) else [config.corpus]
    return [config.init, config.vocabulary, *corpus]


def _pretrain(config, output):
    from kbert.compat import check_jit_compile
    from kbert.training.distribution import get_strategy
    from kbert.training.jax_distribution import check_jax_run, run_scope

    strategy = get_strategy(config.strategy)
    check_jit_compile(strategy, config.jit_compile)
    check_jax_run(strategy, config.batch_size, config.model_config)
    with run_scope(strategy):
        return _run(config, output, strategy)


def _run(config, output, strategy):
    import keras

    from kbert.training.distribution import is_chief

    chief = is_chief(strategy)
    keras.utils.set_random_seed(config.seed)

    model, tokenizer, heads = build_model(config, strategy)
    data = pretraining_data(config, tokenizer, _masker(config, tokenizer),
                            strategy.num_replicas_in_sync)
    plan = plan_steps(config, data.train_examples)
    compile_model(config, model, strategy, plan.total_steps)
    model.match_xla_to(data.heldout, "train", plan.total_steps * config.accumulation)
    run = run_record(config, model, data.source, plan)
    state, initial_epoch = resume(output, model, run, chief)
    start_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    if start_step >= plan.total_steps and _finished(output, config.save_model):
        return json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    start_metrics = _start_metrics(output, model, data.heldout, config.nsp, state, chief)

    logger, seconds = fit(config, output, model, data, plan, run, initial_epoch, start_step,
                          chief, state)
    result = {**evaluate(model, data.heldout, config.nsp),
              **_summary(config, model, tokenizer, data, logger, start_step, state, strategy),
              "start": start_metrics, "train_seconds": seconds, "run": run,
              **({"init_heads": heads} if config.init else {})}
    if config.save_model:
        save_model(model, tokenizer, output, chief)
    if chief:  # last: a metrics.json beside model/ marks a finished run
        _write_json(output / "metrics.json", result)
    return result


def _finished(output, save_model):
    return (output / "metrics.json").is_file() and (
        not save_model or (output / "model").is_dir())


def _as_config(output_dir, config, kwargs):
    if isinstance(config, PretrainConfig):
        if output_dir is not None or kwargs:
            raise TypeError("Give pretrain() a PretrainConfig or its fields as keywords, not "
                            "both.")
        return config
    if config is not None:
        kwargs["bert_config"] = config
    return PretrainConfig(output_dir=output_dir, **kwargs)


def build_model(config, strategy):
    """(BertPretrainer, tokenizer, names of the heads taken from `init`), built in the
    strategy's scope under the dtype policy. Continued pre-training goes on from the heads
    `init` holds, as Google's run_pretraining.py does from its init_checkpoint."""
    from kbert.models.pretrainer import BertPretrainer
    from kbert.models.pretrained import load_backbone_and_tokenizer
    from kbert.presets import load_pretraining_heads

    with strategy.scope():
        backbone, tokenizer = load_backbone_and_tokenizer(
            config.model_name, dtype=config.policy, vocabulary=config.vocabulary,
            causal=config.causal, attention_implementation=config.attention,
            allow_pickle=config.allow_pickle)
        model = BertPretrainer(backbone, use_nsp=config.nsp)
        heads = load_pretraining_heads(model, config.init, config.allow_pickle) \
            if config.init else []
        return model, tokenizer, heads


def _masker(config, tokenizer):
    """The objective's data step: BERT's masking, or next tokens for a causal model."""
    from kbert.data.pretraining.masking import MaskedLM
    from kbert.text.next_token import NextTokenLM

    if config.causal:
        return NextTokenLM.from_tokenizer(tokenizer)
    return MaskedLM.from_tokenizer(tokenizer, mask_rate=config.mask_rate,
                                   max_predictions=config.predictions,
                                   whole_word=config.whole_word)


def compile_model(config, model, strategy, total_steps):
    """AdamW or LAMB on the run's schedule (fine-tuning's builder, `make_optimizer`), compiled
    (with XLA when asked)."""
    from kbert.training.optimizer import make_optimizer

    with strategy.scope():
        opt = make_optimizer(
            config.learning_rate, total_steps, warmup_fraction=config.warmup_fraction,
            weight_decay=config.weight_decay, clipnorm=config.clipnorm, model=model,
            loss_scale=needs_loss_scale(config.policy), optimizer=config.optimizer,
            warmup_steps=config.warmup_steps, decay_power=config.decay_power,
            gradient_accumulation_steps=config.accumulation)
        model.compile(optimizer=opt, jit_compile=config.jit_compile)  # None: kbert's choice


def evaluate(model, heldout, nsp):
    """The held-out losses and accuracies, as floats."""
    scores = {k: float(v) for k, v in model.evaluate(heldout, verbose=0,
                                                       return_dict=True).items()}
    if not nsp:  # one output: Keras names its loss plain "loss"
        scores.setdefault("mlm_loss", scores["loss"])
    return scores


def _start_metrics(output, model, heldout, nsp, state, chief):
    """The untrained model's scores: measured on a fresh run, read back on a resumed one."""
    start_file = output / "start_metrics.json"
    if state is None:
        metrics = evaluate(model, heldout, nsp)
        if chief:
            _write_json(start_file, metrics)
        return metrics
    return json.loads(start_file.read_text()) if start_file.exists() else None


def fit(config, output, model, data, plan, run, initial_epoch, start_step, chief, state=None):
    """Trains from `start_step` to the plan's end, checkpointing in `output`; (step logger,
    seconds). Each checkpoint keeps the step speeds of every attempt so far (`speeds`)."""
    import keras

    from kbert.training.callbacks import StepCheckpoint, StepLogger, StopAtStep

    logs = output / "logs"
    logger = StepLogger(logs / "steps", config.batch_size, every=config.log_every,
                        enabled=chief)
    callbacks = [StopAtStep(plan.total_steps),
                 StepCheckpoint(output / "checkpoints", is_chief=chief,
                                extra_state=lambda: {"run": run,
                                                     "speeds": _speeds(logger, state)}),
                 logger]
    if chief:
        callbacks.append(keras.callbacks.TensorBoard(
            str(logs), update_freq="epoch", write_graph=False,
            profile_batch=config.profile_batches or 0))
    began = time.perf_counter()
    if start_step < plan.total_steps:
        # Each resumed attempt draws fresh data order from its start step.
        model.fit(finish(data.train(config.seed + start_step), config.nsp),
                  epochs=plan.epochs, steps_per_epoch=plan.checkpoint_every * config.accumulation,
                  initial_epoch=initial_epoch, callbacks=callbacks, verbose=config.verbose,
                  shuffle=False)
    return logger, time.perf_counter() - began


def _summary(config, model, tokenizer, data, logger, start_step, state, strategy):
    """metrics.json's entries besides the scores: baseline, steps, speed, digest."""
    import keras

    from kbert.training.distribution import is_multi_worker

    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    baseline, top = most_frequent_baseline(data.heldout, data.counts, data.train(config.seed),
                                           special)
    end_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    speeds = _speeds(logger, state)
    return {
        "baseline_mlm_accuracy": baseline,
        "most_frequent_token": tokenizer.id_to_token(top),
        "steps": end_step,
        "resumed_from_step": start_step if state is not None else None,
        "examples_seen": end_step * config.batch_size * config.accumulation,  # all attempts
        "sequences_per_second": float(np.median(speeds)) if speeds else None,
        "heldout_examples": int(sum(int(x["token_ids"].shape[0]) for x, *_ in data.heldout)),
        "train_examples_per_pass": int(data.train_examples),
        "weights_sha256": _weights_digest(model),
        "multi_worker": is_multi_worker(strategy),
        "replicas": strategy.num_replicas_in_sync,
    }


def _speeds(logger, state):
    """Sequences per second of every step log of the run's attempts: those of the checkpoint
    `state` resumed from, then this attempt's (each attempt's first log, which holds its
    compilation, left out)."""
    return list((state or {}).get("speeds", [])) + [
        h["sequences_per_second"] for h in logger.history[1:]]


def save_model(model, tokenizer, output, chief):
    """OUTPUT/model/ as a Hugging Face directory with heads and vocab.txt. Every worker writes
    (the save runs collective ops); only the chief's copy is kept."""
    from kbert.convert import save_hf

    with tempfile.TemporaryDirectory() as tmp:
        target = output / "model" if chief else pathlib.Path(tmp) / "model"
        save_hf(model, target, tokenizer=tokenizer, overwrite=True)


def _write_json(path, data):
    outputs.write_text(path, json.dumps(data, indent=2, sort_keys=True))


def _weights_digest(model):
    """sha256 of every trained weight's bytes: equal digests mean bit-identical models."""
    import hashlib

    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()
