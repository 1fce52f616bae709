"""`pretrain()`: BERT pre-training (masked LM + next sentence prediction) end to end, resumable.

What `kbert pretrain` calls. One call:

1. reads the corpus — the built-in Wikipedia text, the user's text files (see
   `kbert.data.pretraining.documents`), or a folder of TFRecord shards written by
   `kbert.data.pretraining.write_tfrecords` — and holds out whole documents (for TFRecords: the
   last shard, shards being disjoint sets of documents) for evaluation;
2. builds a `BertPretrainer` on a fresh backbone of `preset` (or on the weights of `init`), in
   the strategy's scope (`kbert.training.distribution`), with the dtype policy for mixed
   precision;
3. compiles it with AdamW (`kbert.training.optimizer`) or LAMB (`kbert.training.lamb`): linear
   warmup then linear (or polynomial) decay over the optimizer steps, weight decay 0.01 except on
   LayerNorm and biases, global-norm clipping, optional gradient accumulation and XLA;
4. trains with plain `model.fit`: dynamic masking (fresh masks every epoch), TensorBoard logs in
   OUTPUT/logs/ (`steps/`: per-step MLM/NSP loss and accuracy, learning rate, sequences/s;
   `train/`: Keras' epoch summaries and, on request, a profiler trace), a checkpoint every
   `checkpoint_every` optimizer steps in OUTPUT/checkpoints/latest/ (written atomically);
   rerunning the same call after a crash resumes from it and ends at the same step count on the
   same schedule;
5. scores the held-out documents before (fresh runs) and after training and writes
   OUTPUT/metrics.json: `mlm_accuracy`, `nsp_accuracy`, their losses, the most-frequent-token
   baseline (`baseline_mlm_accuracy`: always predicting the training data's most frequent
   token) and the start values; the trained model goes to OUTPUT/model/ as a Hugging Face
   directory (backbone + MLM/NSP heads + vocab.txt), which `kbert finetune --init` reads.

Step accounting: `steps` counts optimizer updates; with `gradient_accumulation_steps=k` each one
consumes k batches of `batch_size` (an effective batch of k·batch_size), and the schedule runs
over updates. Under float16 a step skipped for overflowing gradients (its update is zero, the
loss scale halves) counts as a step. `epochs` is converted to steps from the number of pairs
one pass over the training documents makes.
"""

import json
import math
import os
import pathlib
import random
import tempfile
import time

import numpy as np

from kbert.training.precision import dtype_policy, needs_loss_scale

OPTIMIZERS = ("adamw", "lamb")


def default_max_predictions(sequence_length, mask_rate=0.15):
    """20 at length 128 (the paper's setting), else ceil(mask_rate · length)."""
    return 20 if sequence_length == 128 else max(1, math.ceil(mask_rate * sequence_length))


def _build(preset, init, config, vocabulary, dtype, causal=False):
    """(backbone, tokenizer): `init`'s weights, else a fresh `config` or `preset` (on
    `vocabulary`, default BERT's uncased one); see `kbert.presets`."""
    from kbert.presets import load_backbone_and_tokenizer, resolve_preset

    if init and vocabulary is not None:
        raise ValueError("`vocabulary` is for a fresh model; `init` brings its own.")
    if not init and config is None and resolve_preset(preset).load_weights:
        raise ValueError(f"preset {preset!r} has pretrained weights: pass it as `init`; "
                         "`preset` names a fresh model's size.")
    return load_backbone_and_tokenizer(init or config or preset, dtype=dtype,
                                       vocabulary=vocabulary, causal=causal)


def make_pretraining_optimizer(model, learning_rate, total_steps, optimizer="adamw",
                               warmup_steps=None, warmup_fraction=0.01, decay_power=1.0,
                               weight_decay=0.01, clipnorm=1.0, gradient_accumulation_steps=1,
                               loss_scale=False):
    """AdamW or LAMB with warmup + polynomial (power 1: linear) decay over `total_steps`
    updates, no weight decay on LayerNorm/bias (`no_decay_variables(model)`), global-norm
    clipping, optional gradient accumulation (the schedule still counts updates), and for
    float16 a loss-scale wrapper whose skipped steps count as steps."""
    from kbert.training.lamb import Lamb
    from kbert.training.optimizer import AdamW, LossScaleOptimizer, WarmupPolynomialDecay, \
        no_decay_variables

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
    if warmup_steps is None:
        warmup_steps = int(round(warmup_fraction * total_steps))
    warmup_steps = min(int(warmup_steps), int(total_steps))
    accumulation = gradient_accumulation_steps if gradient_accumulation_steps > 1 else None
    schedule = WarmupPolynomialDecay(learning_rate, total_steps, warmup_steps, decay_power,
                                     batches_per_step=accumulation or 1)
    common = dict(learning_rate=schedule, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                  global_clipnorm=clipnorm, gradient_accumulation_steps=accumulation)
    if optimizer == "adamw":
        opt = AdamW(weight_decay=weight_decay, **common)
    else:
        opt = Lamb(weight_decay_rate=weight_decay, **common)
    opt.exclude_from_weight_decay(var_list=no_decay_variables(model))
    if loss_scale:
        opt = LossScaleOptimizer(opt)
    return opt


def _heldout_split(n_documents, heldout_documents, seed):
    if heldout_documents is None:
        heldout_documents = min(500, max(1, n_documents // 20))
    heldout_documents = min(int(heldout_documents), n_documents - 1)
    if heldout_documents < 1:
        raise ValueError("The corpus needs at least two documents (one is held out).")
    indices = list(range(n_documents))
    random.Random(seed + 99).shuffle(indices)
    return set(indices[:heldout_documents])


def _is_tfrecord_dir(corpus):
    return corpus is not None and (pathlib.Path(os.fspath(corpus)) / "dataset.json").is_file()


def _write_json(path, data):
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def pretrain(output, preset="mini", init=None, corpus=None, corpus_format="auto", steps=None,
             epochs=None, batch_size=32, sequence_length=128, learning_rate=1e-4,
             optimizer="adamw", warmup_steps=None, warmup_fraction=0.01, decay_power=1.0,
             weight_decay=0.01, clipnorm=1.0, gradient_accumulation_steps=1,
             mixed_precision=None, jit_compile=False, checkpoint_every=1000, strategy=None,
             whole_word=False, mask_rate=0.15, max_predictions=None, nsp=True,
             short_seq_prob=0.1, heldout_documents=None, eval_examples=2048, seed=0,
             log_every=10, profile_batches=None, config=None, vocabulary=None,
             save_model=True, verbose="auto"):
    """Pre-trains BERT; returns the metrics dict written to OUTPUT/metrics.json.

    Args (the CLI's flags map one to one): `output` the run folder; `preset` the size of a
    fresh model ("tiny" ... "large") or `init` a checkpoint to continue from; `corpus` None
    (Wikipedia), text files/folder/glob, or a TFRecord folder; `steps` optimizer updates, or
    `epochs` passes over the training pairs; `batch_size` per update (per replica group: the
    global batch), `sequence_length`; `learning_rate` peak, `optimizer` "adamw" or "lamb",
    `warmup_steps` (or `warmup_fraction` of the steps), `decay_power` (1 = linear);
    `weight_decay`, `clipnorm`, `gradient_accumulation_steps`; `mixed_precision` None, "bf16" or
    "fp16" (with dynamic loss scaling); `jit_compile` for XLA (metrics.json's `run` records
    whether Keras kept it on); `checkpoint_every` updates between checkpoints; `strategy`
    a name for `kbert.training.distribution.get_strategy` or a strategy; `whole_word` masking,
    `mask_rate`, `max_predictions` (default 20 at length 128); `nsp=False` for the No-NSP
    ablation; `heldout_documents` (default 5% up to 500); `eval_examples` held-out pairs
    scored; `profile_batches` a batch or a (first, last) pair, e.g. (10, 20), counted from the
    start of this call's training (a resumed run counts again from 1), to trace with the
    TensorFlow profiler into OUTPUT/logs/train/plugins/profile/ for TensorBoard's profile tab.
    """
    import keras

    from kbert.data.pretraining import pairs
    from kbert.data.pretraining.documents import corpus_documents, tokenize_documents
    from kbert.data.pretraining.masking import MaskedLM
    from kbert.data.pretraining.pipeline import pretraining_dataset
    from kbert.data.pretraining.tfrecords import read_meta, tfrecord_dataset, tfrecord_files
    from kbert.models.pretrainer import BertPretrainer
    from kbert.training.callbacks import StepCheckpoint, StepLogger, StopAtStep, \
        restore_checkpoint
    from kbert.training.distribution import (check_jit_compile, get_strategy, is_chief,
                                             is_multi_worker)

    if (steps is None) == (epochs is None):
        raise ValueError("Give exactly one of `steps` and `epochs`.")
    policy = dtype_policy(mixed_precision)
    accumulation = max(1, int(gradient_accumulation_steps))
    max_predictions = max_predictions or default_max_predictions(sequence_length, mask_rate)
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    strategy = get_strategy(strategy)
    check_jit_compile(strategy, jit_compile)
    chief = is_chief(strategy)
    keras.utils.set_random_seed(seed)

    with strategy.scope():
        backbone, tokenizer = _build(preset, init, config, vocabulary, policy)
        model = BertPretrainer(backbone, use_nsp=nsp)
    masker = MaskedLM.from_tokenizer(tokenizer, mask_rate=mask_rate,
                                     max_predictions=max_predictions, whole_word=whole_word)
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}

    # --- data -------------------------------------------------------------------------------
    def finish(ds):
        if nsp:
            return ds
        return ds.map(lambda x, y, w: (x, {"mlm": y["mlm"]}, {"mlm": w["mlm"]}))

    counts = None
    if _is_tfrecord_dir(corpus):
        meta = read_meta(corpus)
        if meta["sequence_length"] != sequence_length:
            raise ValueError(f"The TFRecords at {corpus} have sequence_length "
                             f"{meta['sequence_length']}, not {sequence_length}.")
        files = tfrecord_files(corpus)
        if len(files) < 2:
            raise ValueError("TFRecord input needs at least two shards (the last is held out).")
        train_files, heldout_files = files[:-1], files[-1:]
        per_shard = dict(zip(files, meta["examples_per_shard"]))
        train_examples = sum(per_shard[f] for f in train_files)

        def train_data(data_seed):
            return tfrecord_dataset(train_files if len(train_files) > 1 else train_files[0],
                                    batch_size, masker, seed=data_seed)

        heldout = tfrecord_dataset(heldout_files[0], batch_size, masker, seed=seed + 1,
                                   repeat=False, shuffle_buffer=0, deterministic=True)
        source = str(corpus)
    else:
        documents = list(tokenize_documents(corpus_documents(corpus, corpus_format), tokenizer))
        held = _heldout_split(len(documents), heldout_documents, seed)
        train_docs = [d for i, d in enumerate(documents) if i not in held]
        heldout_docs = [d for i, d in enumerate(documents) if i in held]
        del documents
        train_examples = sum(1 for _ in pairs.corpus_pairs(
            train_docs, sequence_length, random.Random(seed), short_seq_prob, nsp))
        counts = np.bincount(np.concatenate([s for d in train_docs for s in d]),
                             minlength=tokenizer.vocabulary_size())

        def train_data(data_seed):
            return pretraining_dataset(train_docs, tokenizer, masker, sequence_length,
                                       batch_size, seed=data_seed,
                                       short_seq_prob=short_seq_prob, nsp=nsp)

        heldout = pretraining_dataset(heldout_docs, tokenizer, masker, sequence_length,
                                      batch_size, seed=seed + 1, repeat=False, shuffle_buffer=0,
                                      short_seq_prob=short_seq_prob, nsp=nsp)
        source = "wikipedia" if corpus is None else str(corpus)
    heldout = _materialize(finish(heldout.take(max(1, eval_examples // batch_size))),
                           batch_size)

    if steps is None:
        steps_per_pass = train_examples // (batch_size * accumulation)
        if steps_per_pass < 1:
            raise ValueError(f"One pass over the corpus makes {train_examples} pairs, fewer "
                             f"than one step of {batch_size * accumulation}.")
        steps = int(epochs) * steps_per_pass
    total_steps = int(steps)
    checkpoint_every = max(1, min(int(checkpoint_every or total_steps), total_steps))
    fit_epochs = math.ceil(total_steps / checkpoint_every)

    # --- model ------------------------------------------------------------------------------
    with strategy.scope():
        opt = make_pretraining_optimizer(
            model, learning_rate, total_steps, optimizer, warmup_steps, warmup_fraction,
            decay_power, weight_decay, clipnorm, accumulation,
            loss_scale=needs_loss_scale(policy))
        model.compile(optimizer=opt, jit_compile=bool(jit_compile))

    run = {"preset": None if init or config else preset, "init": str(init) if init else None,
           "corpus": source, "total_steps": total_steps, "batch_size": batch_size,
           "sequence_length": sequence_length, "gradient_accumulation_steps": accumulation,
           "learning_rate": learning_rate, "optimizer": optimizer, "nsp": nsp,
           "whole_word": whole_word, "max_predictions": max_predictions,
           "mixed_precision": policy, "jit_compile": bool(model.jit_compile),
           "checkpoint_every": checkpoint_every, "seed": seed}
    checkpoints = output / "checkpoints"
    state = restore_checkpoint(checkpoints, model)
    initial_epoch = 0
    if state is not None:
        for key in ("total_steps", "batch_size", "sequence_length", "checkpoint_every",
                    "gradient_accumulation_steps"):
            if key in state.get("run", {}) and state["run"][key] != run[key]:
                raise ValueError(f"{output} holds a checkpoint of a run with {key}="
                                 f"{state['run'][key]}, not {run[key]}; use another output "
                                 "folder or the same settings to resume.")
        initial_epoch = int(state["epoch"])
    start_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))

    def evaluate():
        scores = {k: float(v) for k, v in model.evaluate(heldout, verbose=0,
                                                           return_dict=True).items()}
        if not nsp:  # one output: Keras names its loss plain "loss"
            scores.setdefault("mlm_loss", scores["loss"])
        return scores

    start_file = output / "start_metrics.json"
    if state is None:
        start_metrics = evaluate()
        if chief:
            _write_json(start_file, start_metrics)
    else:
        start_metrics = json.loads(start_file.read_text()) if start_file.exists() else None

    # --- train ------------------------------------------------------------------------------
    logs = output / "logs"
    logger = StepLogger(logs / "steps", batch_size, every=log_every, enabled=chief)
    callbacks = [
        StopAtStep(total_steps),
        StepCheckpoint(checkpoints, extra_state={"run": run}, is_chief=chief),
        logger,
    ]
    if chief:
        callbacks.append(keras.callbacks.TensorBoard(
            str(logs), update_freq="epoch", write_graph=False,
            profile_batch=profile_batches or 0))
    began = time.perf_counter()
    if start_step < total_steps:
        model.fit(finish(train_data(seed + start_step)), epochs=fit_epochs,
                  steps_per_epoch=checkpoint_every * accumulation, initial_epoch=initial_epoch,
                  callbacks=callbacks, verbose=verbose, shuffle=False)
    train_seconds = time.perf_counter() - began
    end_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))

    # --- evaluate and save ------------------------------------------------------------------
    metrics = evaluate()
    baseline, top_token = _most_frequent_baseline(heldout, counts, train_data(seed), special)
    speeds = [h["sequences_per_second"] for h in logger.history[1:]]
    result = {
        **metrics,
        "baseline_mlm_accuracy": baseline,
        "most_frequent_token": tokenizer.id_to_token(top_token),
        "start": start_metrics,
        "steps": end_step,
        "resumed_from_step": start_step if state is not None else None,
        "examples_seen": (end_step - start_step) * batch_size * accumulation,
        "train_seconds": train_seconds,
        "sequences_per_second": float(np.median(speeds)) if speeds else None,
        "heldout_examples": int(sum(int(x["token_ids"].shape[0]) for x, *_ in heldout)),
        "train_examples_per_pass": int(train_examples),
        "weights_sha256": _weights_digest(model),
        "multi_worker": is_multi_worker(strategy),
        "replicas": strategy.num_replicas_in_sync,
        "run": run,
    }
    if chief:
        _write_json(output / "metrics.json", result)
    if save_model:
        from kbert.convert import save_hf

        with tempfile.TemporaryDirectory() as tmp:
            vocab = pathlib.Path(tmp) / "vocab.txt"
            vocab.write_text("\n".join(tokenizer.get_vocabulary()) + "\n", encoding="utf-8")
            target = output / "model" if chief else pathlib.Path(tmp) / "model"
            save_hf(model, target, vocab_file=vocab, overwrite=True)
    return result


def _weights_digest(model):
    """sha256 of every trained weight's bytes: equal digests mean bit-identical models."""
    import hashlib

    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def _materialize(dataset, batch_size):
    """The (finite) dataset's batches, computed once, as a dataset of known length: the same
    held-out pairs and masks at every evaluation."""
    import tensorflow as tf

    batches = list(dataset.as_numpy_iterator())
    if not batches:
        raise ValueError("The held-out documents make no batch; hold out more documents or "
                         "use a smaller batch size.")
    joined = tf.nest.map_structure(lambda *parts: np.concatenate(parts), *batches)
    return tf.data.Dataset.from_tensor_slices(joined).batch(batch_size)


def _most_frequent_baseline(heldout, counts, train, special):
    """Accuracy on the held-out predictions of always answering the most frequent token of the
    training data (token counts of the training documents, or, for TFRecords, of the MLM
    targets of 50 training batches)."""
    if counts is None:
        ids = [y["mlm"].numpy()[w["mlm"].numpy() > 0] for _, y, w in train.take(50)]
        counts = np.bincount(np.concatenate(ids).astype(np.int64))
    counts = counts.copy()
    for token in special:
        if token < len(counts):
            counts[token] = 0
    top = int(np.argmax(counts))
    hits = total = 0.0
    for _, y, w in heldout:
        weights = w["mlm"].numpy()
        hits += float(((y["mlm"].numpy() == top) * weights).sum())
        total += float(weights.sum())
    return hits / max(total, 1.0), top
