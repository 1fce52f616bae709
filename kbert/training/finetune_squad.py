"""SQuAD v1.1 / v2.0 fine-tuning, evaluation with the official metric, and answering raw
questions (`finetune_squad`, `evaluate_squad`, `answer_questions`)."""

import pathlib
import time

import keras

from kbert.training.finetune import EVAL_SEED, build_backbone
from kbert.training.optimizer import make_optimizer
from kbert.training.precision import dtype_policy, needs_loss_scale
from kbert.training.runs import subset, steps_and_epochs, fit_with_logs, save_run

SQUAD_TASKS = {"squad": "1.1", "squad2": "2.0"}


def squad_splits(version="1.1", data_dir=None, unanswerable_fraction=0.5):
    """{"train", "dev"} examples. v1.1 reads train-v1.1.json / dev-v1.1.json from `data_dir`
    (fetched when None). v2.0 reads train-v2.0.json / dev-v2.0.json when `data_dir` has them,
    else builds v2.0-style splits from v1.1 with `add_unanswerable` (fixed seeds)."""
    from kbert.data.squad import add_unanswerable, read_squad

    if data_dir is None:
        from kbert.data.sources import fetch

        data_dir = fetch("squad")
    data_dir = pathlib.Path(data_dir)
    if version == "2.0" and (data_dir / "train-v2.0.json").exists():
        return {split: read_squad(data_dir / f"{split}-v2.0.json")[0]
                for split in ("train", "dev")}
    splits = {split: read_squad(data_dir / f"{split}-v1.1.json")[0] for split in ("train", "dev")}
    if version == "2.0":
        splits = {"train": add_unanswerable(splits["train"], unanswerable_fraction, seed=0),
                  "dev": add_unanswerable(splits["dev"], unanswerable_fraction, seed=EVAL_SEED)}
    return splits


def evaluate_squad(model, tokenizer, examples, version="1.1", sequence_length=384,
                   doc_stride=128, max_query_length=64, n_best=20, max_answer_length=30,
                   null_threshold=0.0, batch_size=64):
    """(metrics, predictions, details) of `model` on `examples`: the official EM / F1 (×100);
    for v2.0 also the has-answer / no-answer breakdown and the dev-optimal no-answer threshold
    (`best_f1_threshold`, `best_f1`: tuned on these same examples, an upper bound)."""
    from kbert.data.squad import decode_answers, predict_logits, references, squad_features
    from kbert.evaluation.squad import best_null_threshold, squad_metrics

    features = squad_features(examples, tokenizer, sequence_length, doc_stride,
                              max_query_length)
    start, end = predict_logits(model, features, batch_size)
    predictions, details = decode_answers(examples, features, start, end, version, n_best,
                                          max_answer_length, null_threshold)
    gold = references(examples)
    metrics = squad_metrics(predictions, gold, version)
    if version == "2.0":
        diffs = {q: d["null_score_diff"] for q, d in details.items()
                 if d["null_score_diff"] is not None}
        if diffs:
            threshold, best = best_null_threshold(
                diffs, {q: details[q]["best_text"] for q in diffs}, gold)
            metrics.update(best_f1_threshold=threshold, best_f1=best)
        metrics["null_threshold"] = null_threshold
    metrics["features"] = int(len(features["token_ids"]))
    return metrics, predictions, details


def finetune_squad(version="1.1", init="minilm_l6_h384_uncased", output_dir="runs/squad",
                   epochs=2, steps=None, batch_size=32, sequence_length=384, doc_stride=128,
                   max_query_length=64, learning_rate=5e-5, max_train_examples=None,
                   max_eval_examples=None, data_dir=None, warmup_fraction=0.1,
                   weight_decay=0.01, n_best=20, max_answer_length=30, null_threshold=0.0,
                   unanswerable_fraction=0.5, seed=0, verbose=1, splits=None,
                   mixed_precision=None):
    """Fine-tunes a `BertSpanLabeler` on SQuAD `version` ("1.1" or "2.0"), scores the dev set
    with the official EM / F1, and saves metrics, logs, predictions and the model.

    Arguments as `kbert.training.finetune` (init, epochs/steps, batch_size, learning_rate,
    max_train_examples: a random train subset of that many questions chosen with `seed`,
    max_eval_examples: a fixed dev subset, warmup_fraction, weight_decay, seed,
    mixed_precision), plus:
      sequence_length, doc_stride, max_query_length: the windowing (`squad_features`);
      n_best, max_answer_length, null_threshold: the decoding (`decode_answers`);
      unanswerable_fraction: for v2.0 built from v1.1 (`squad_splits`);
      splits: {"train": [...], "dev": [...]} `SquadExample`s to use instead of the files.

    Returns the dict written to metrics.json: `exact_match`, `f1` (dev, ×100; SQuAD's test
    set is hidden, so dev is the reported split), v2.0's breakdown and tuned threshold, and the
    run's settings, sizes and timings.
    """
    from kbert.data.squad import span_dataset, squad_features, training_features
    from kbert.models.span_labeler import BertSpanLabeler

    version = SQUAD_TASKS.get(version, str(version))
    if version not in ("1.1", "2.0"):
        raise ValueError(f"version must be '1.1' or '2.0', got {version!r}.")
    policy = dtype_policy(mixed_precision)
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    splits = splits or squad_splits(version, data_dir, unanswerable_fraction)
    train = subset(splits["train"], max_train_examples, seed)
    dev = subset(splits["dev"], max_eval_examples, EVAL_SEED)

    backbone, tokenizer = build_backbone(init, dtype=policy)
    model = BertSpanLabeler(backbone)
    features = training_features(
        train, squad_features(train, tokenizer, sequence_length, doc_stride, max_query_length))
    count = len(features["token_ids"])
    epochs, steps_per_epoch = steps_and_epochs(count, batch_size, epochs, steps)
    model.compile(optimizer=make_optimizer(learning_rate, epochs * steps_per_epoch,
                                           warmup_fraction, weight_decay, model=model,
                                           loss_scale=needs_loss_scale(policy)))
    dataset = span_dataset(features, batch_size, shuffle=True, repeat=True, seed=seed)
    history, train_seconds = fit_with_logs(model, dataset, epochs, steps_per_epoch, output_dir, verbose)

    start = time.perf_counter()
    results, predictions, _ = evaluate_squad(
        model, tokenizer, dev, version, sequence_length, doc_stride, max_query_length, n_best,
        max_answer_length, null_threshold)
    eval_seconds = time.perf_counter() - start
    task = "squad2" if version == "2.0" else "squad"
    metrics = {
        **results,
        "eval_split": "dev",
        "dev": dict(results),
        "task": task,
        "version": version,
        "init": str(init),
        "settings": {"epochs": epochs, "steps": epochs * steps_per_epoch,
                     "batch_size": batch_size, "sequence_length": sequence_length,
                     "doc_stride": doc_stride, "max_query_length": max_query_length,
                     "learning_rate": learning_rate, "warmup_fraction": warmup_fraction,
                     "weight_decay": weight_decay, "n_best": n_best,
                     "max_answer_length": max_answer_length, "null_threshold": null_threshold,
                     "seed": seed, "mixed_precision": policy},
        "sizes": {"train": len(train), "train_features": count, "dev": len(dev),
                  "unmappable_train_answers": len(features["unmappable"]),
                  "parameters": int(backbone.count_params())},
        "final_train_loss": float(history.history["loss"][-1]),
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
    }
    task_info = {"task": task, "version": version, "sequence_length": sequence_length,
                 "doc_stride": doc_stride, "max_query_length": max_query_length,
                 "n_best": n_best, "max_answer_length": max_answer_length,
                 "null_threshold": null_threshold}
    save_run(model, tokenizer, output_dir, task_info, metrics, predictions)
    return metrics


def answer_questions(model, tokenizer, questions, contexts, version="1.1", sequence_length=384,
                     doc_stride=128, max_query_length=64, n_best=20, max_answer_length=30,
                     null_threshold=0.0):
    """Answers for raw (question, context) strings (lists of equal length, or one string
    each). Returns one dict per question: `answer` (text, "" = no answer in v2.0), `start`,
    `end` (its character span in the context, -1 for no answer), `score`, `null_score_diff`.
    An empty question or context raises ValueError."""
    from kbert.data.squad import SquadExample, decode_answers, predict_logits, squad_features

    single = isinstance(questions, str)
    if single:
        questions, contexts = [questions], [contexts]
    if len(questions) != len(contexts):
        raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts.")
    examples = []
    for n, (q, c) in enumerate(zip(questions, contexts)):
        if not q or not q.strip():
            raise ValueError(f"Question {n} is empty.")
        if not c or not c.strip():
            raise ValueError(f"Context {n} is empty.")
        examples.append(SquadExample(str(n), q, c))
    features = squad_features(examples, tokenizer, sequence_length, doc_stride,
                              max_query_length)
    start, end = predict_logits(model, features)
    _, details = decode_answers(examples, features, start, end, version, n_best,
                                max_answer_length, null_threshold)
    answers = [{"answer": d["text"], "start": d["start"], "end": d["end"],
                "score": d["score"], "null_score_diff": d["null_score_diff"]}
               for d in (details[e.id] for e in examples)]
    return answers[0] if single else answers


# ------------------------------------------------------------------------------ CoNLL
