"""Fine-tuning and prediction for the span and tagging tasks: SQuAD v1.1 / v2.0 and CoNLL-2003.

`finetune_squad` and `finetune_conll` follow `kbert.training.finetune.finetune`: same backbone
choices (`init`), the same optimizer recipe (`make_optimizer`: AdamW, 10% warmup, linear
decay), `model.fit` on tf.data with a progress bar and TensorBoard logs in OUTPUT/logs/, the
held-out scores in OUTPUT/metrics.json, and OUTPUT/model.keras + OUTPUT/vocab.txt (+ the
casing in OUTPUT/kbert_tokenizer.json, as `finetune` writes it). They also
write OUTPUT/task.json (the settings `predict_from_dir` needs: task, lengths, threshold, label
names, casing) and OUTPUT/predictions.json (SQuAD: id → answer; CoNLL: test tags).

`finetune_task(name, **kwargs)` dispatches "squad" (v1.1), "squad2" (v2.0) and "conll".

Prediction on raw text: `answer_questions(model, tokenizer, questions, contexts)` → answer text
and character span; `tag_entities(model, tokenizer, texts)` → entities with character spans;
`predict_from_dir(OUTPUT, ...)` loads a saved run and does either.
"""

import json
import math
import pathlib
import random
import re
import time
import warnings

import keras
import numpy as np

from kbert.training.finetune import EVAL_SEED, build_backbone
from kbert.training.optimizer import make_optimizer

SQUAD_TASKS = {"squad": "1.1", "squad2": "2.0"}


def _subset(examples, limit, seed):
    if limit is None or limit >= len(examples):
        return list(examples)
    return random.Random(seed).sample(list(examples), limit)


def _steps(count, batch_size, epochs, steps):
    if steps is None and (epochs is None or epochs <= 0):
        raise ValueError("Give a positive number of epochs or steps.")
    if steps is not None:
        return 1, int(steps)
    return int(epochs), max(1, math.ceil(count / batch_size))


def _fit(model, dataset, epochs, steps_per_epoch, output_dir, verbose):
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


def _save(model, tokenizer, output_dir, task_info, metrics, predictions):
    model.save(output_dir / "model.keras")
    (output_dir / "vocab.txt").write_text("\n".join(tokenizer.get_vocabulary()) + "\n",
                                          encoding="utf-8")
    task_info = {**task_info, "lowercase": tokenizer.lowercase}
    for name, value in (("task.json", task_info), ("metrics.json", metrics),
                        ("predictions.json", predictions),
                        ("kbert_tokenizer.json", {"lowercase": tokenizer.lowercase})):
        with open(output_dir / name, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)


# ------------------------------------------------------------------------------ SQuAD

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
                   unanswerable_fraction=0.5, seed=0, verbose=1, splits=None):
    """Fine-tunes a `BertSpanLabeler` on SQuAD `version` ("1.1" or "2.0"), scores the dev set
    with the official EM / F1, and saves metrics, logs, predictions and the model.

    Arguments as `kbert.training.finetune` (init, epochs/steps, batch_size, learning_rate,
    max_train_examples: a random train subset of that many questions chosen with `seed`,
    max_eval_examples: a fixed dev subset, warmup_fraction, weight_decay, seed), plus:
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
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    splits = splits or squad_splits(version, data_dir, unanswerable_fraction)
    train = _subset(splits["train"], max_train_examples, seed)
    dev = _subset(splits["dev"], max_eval_examples, EVAL_SEED)

    backbone, tokenizer = build_backbone(init)
    model = BertSpanLabeler(backbone)
    features = training_features(
        train, squad_features(train, tokenizer, sequence_length, doc_stride, max_query_length))
    count = len(features["token_ids"])
    epochs, steps_per_epoch = _steps(count, batch_size, epochs, steps)
    model.compile(optimizer=make_optimizer(learning_rate, epochs * steps_per_epoch,
                                           warmup_fraction, weight_decay, model=model))
    dataset = span_dataset(features, batch_size, shuffle=True, repeat=True, seed=seed)
    history, train_seconds = _fit(model, dataset, epochs, steps_per_epoch, output_dir, verbose)

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
                     "seed": seed},
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
    _save(model, tokenizer, output_dir, task_info, metrics, predictions)
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

def evaluate_conll(model, features, sentences, label_names, batch_size=64):
    """(metrics, predicted tags): entity precision / recall / F1 (fractions in [0, 1], as
    seqeval reports them) with per-type scores, and the word-level tags."""
    from kbert.data.conll import decode_tags, tagging_dataset
    from kbert.evaluation.entities import entity_metrics

    logits = []
    for x, _, _ in tagging_dataset(features, batch_size):
        out = np.asarray(model.predict_on_batch(x), "float32")
        logits.append(np.pad(out, [(0, 0), (0, features["token_ids"].shape[1] - out.shape[1]),
                                   (0, 0)]))
    logits = np.concatenate(logits)
    predicted = decode_tags(logits, features["word_index"], [len(s.words) for s in sentences],
                            label_names)
    metrics = entity_metrics([s.tags for s in sentences], predicted)
    metrics["truncated_words"] = int(features["truncated_words"])
    return metrics, predicted


def finetune_conll(init="minilm_l6_h384_uncased", output_dir="runs/conll", epochs=3,
                   steps=None, batch_size=32, sequence_length=128, learning_rate=None,
                   max_train_examples=None, max_eval_examples=None, mode="finetune",
                   data_dir=None, scheme="auto", warmup_fraction=0.1, weight_decay=0.01,
                   lstm_units=128, seed=0, verbose=1, splits=None, label_names=None):
    """Fine-tunes a `BertTokenClassifier` on CoNLL-2003 NER and scores entity-level
    precision / recall / F1 (seqeval's default mode) on dev and test.

    Arguments as `kbert.training.finetune` (max_train_examples / max_eval_examples count
    sentences), plus:
      mode: "finetune" (all weights) or "feature" (the paper's feature-based variant: frozen
        BERT, last four layers concatenated, a BiLSTM tagger of `lstm_units` per direction);
        default learning rate 5e-5, or 1e-3 with "feature";
      scheme: the files' tag scheme ("auto", "iob1", "iob2"; IOB1 is converted to IOB2);
      splits: {"train", "dev", "test"} → `TaggedSentence` lists instead of the files;
      label_names: the tag set (default: CoNLL-2003's nine tags; else the sorted tags of the
        training split with "O" first).

    Returns the dict written to metrics.json: `precision`, `recall`, `f1` of the test split
    at the top level, `dev` and `test` dicts (with per-type scores), settings, sizes, timings.
    """
    from kbert.data.conll import CONLL2003_LABELS, conll2003, conll_features, tagging_dataset
    from kbert.models.token_classifier import BertTokenClassifier

    if mode not in ("finetune", "feature"):
        raise ValueError(f"mode must be 'finetune' or 'feature', got {mode!r}.")
    if learning_rate is None:
        learning_rate = 1e-3 if mode == "feature" else 5e-5
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    splits = splits or conll2003(data_dir, scheme)
    train = _subset(splits["train"], max_train_examples, seed)
    held_out = {split: _subset(splits[split], max_eval_examples, EVAL_SEED)
                for split in ("dev", "test") if splits.get(split)}
    if label_names is None:
        tags = {t for s in splits["train"] for t in s.tags}
        label_names = (CONLL2003_LABELS if tags <= set(CONLL2003_LABELS)
                       else ["O"] + sorted(tags - {"O"}))
    label_names = list(label_names)

    backbone, tokenizer = build_backbone(init)
    feature_layers = (tuple(range(-min(4, backbone.config.num_layers), 0))
                      if mode == "feature" else None)
    model = BertTokenClassifier(backbone, label_names=label_names,
                                feature_layers=feature_layers, lstm_units=lstm_units)
    features = conll_features(train, tokenizer, sequence_length, label_names)
    epochs, steps_per_epoch = _steps(len(train), batch_size, epochs, steps)
    model.compile(optimizer=make_optimizer(learning_rate, epochs * steps_per_epoch,
                                           warmup_fraction, weight_decay, model=model))
    dataset = tagging_dataset(features, batch_size, shuffle=True, repeat=True, seed=seed,
                              bucket=True)
    history, train_seconds = _fit(model, dataset, epochs, steps_per_epoch, output_dir, verbose)

    results, predictions = {}, {}
    start = time.perf_counter()
    for split, sentences in held_out.items():
        split_features = conll_features(sentences, tokenizer, sequence_length, label_names)
        results[split], predictions[split] = evaluate_conll(model, split_features, sentences,
                                                            label_names)
    eval_seconds = time.perf_counter() - start
    final = "test" if "test" in results else "dev"
    metrics = {
        **{k: results[final][k] for k in ("precision", "recall", "f1")},
        "eval_split": final,
        **results,
        "task": "conll",
        "init": str(init),
        "mode": mode,
        "label_names": label_names,
        "settings": {"epochs": epochs, "steps": epochs * steps_per_epoch,
                     "batch_size": batch_size, "sequence_length": sequence_length,
                     "learning_rate": learning_rate, "warmup_fraction": warmup_fraction,
                     "weight_decay": weight_decay, "lstm_units": lstm_units, "seed": seed},
        "sizes": {"train": len(train), **{k: len(v) for k, v in held_out.items()},
                  "truncated_train_words": int(features["truncated_words"]),
                  "parameters": int(backbone.count_params()),
                  "trainable_parameters": int(sum(np.prod(v.shape)
                                                  for v in model.trainable_weights))},
        "final_train_loss": float(history.history["loss"][-1]),
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
    }
    task_info = {"task": "conll", "sequence_length": sequence_length,
                 "label_names": label_names}
    _save(model, tokenizer, output_dir, task_info, metrics,
          {split: [{"words": s.words, "gold": s.tags, "predicted": p}
                   for s, p in zip(held_out[split], predictions[split])]
           for split in predictions})
    return metrics


_WORD = re.compile(r"\w+(?:[-'’.&]\w+)*|[^\w\s]")


def split_words(text):
    """(words, [(start, end)]) of raw text, CoNLL-style: runs of word characters (joined by
    inner hyphens, apostrophes, periods, ampersands) and single punctuation marks."""
    matches = list(_WORD.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


def tag_entities(model, tokenizer, texts, label_names=None, sequence_length=128):
    """Named entities in raw text (a string or a list of them). Returns per text a list of
    {"text", "type", "start", "end"} (character span in the text), and with a list input a
    list of such lists. Words beyond `sequence_length` sub-tokens are tagged O."""
    from kbert.data.conll import conll_features, decode_tags
    from kbert.evaluation.entities import entity_spans

    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    label_names = label_names or getattr(model, "label_names", None)
    if not label_names:
        raise ValueError("label_names are needed (the model was built without them).")
    results, split = [], [split_words(t) for t in texts]
    nonempty = [n for n, (words, _) in enumerate(split) if words]
    tags = {}
    if nonempty:
        features = conll_features([split[n][0] for n in nonempty], tokenizer, sequence_length,
                                  label_names)
        logits = np.asarray(model.predict_on_batch(
            {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}), "float32")
        decoded = decode_tags(logits, features["word_index"],
                              [len(split[n][0]) for n in nonempty], label_names)
        tags = dict(zip(nonempty, decoded))
    for n, text in enumerate(texts):
        entities = []
        for kind, first, last in entity_spans(tags.get(n, [])):
            start, end = split[n][1][first][0], split[n][1][last][1]
            entities.append({"text": text[start:end], "type": kind, "start": start, "end": end})
        results.append(entities)
    return results[0] if single else results


# ------------------------------------------------------------------------------ entry points

def finetune_task(task, **kwargs):
    """`kbert finetune --task squad|squad2|conll`: `finetune_squad` (v1.1 / v2.0) or
    `finetune_conll` with `kwargs` (arguments given as None take the function's default)."""
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if task in SQUAD_TASKS:
        if kwargs.pop("mode", "finetune") != "finetune":
            raise ValueError("SQuAD supports mode='finetune' only.")
        return finetune_squad(version=SQUAD_TASKS[task], **kwargs)
    if task == "conll":
        return finetune_conll(**kwargs)
    raise ValueError(f"Unknown span/tagging task {task!r}; known: squad, squad2, conll.")


def load_run(model_dir):
    """(model, tokenizer, task info) of a run saved by `finetune_squad` / `finetune_conll`."""
    import kbert.models.span_labeler  # noqa: F401  (registers the classes the file names)
    import kbert.models.token_classifier  # noqa: F401
    from kbert.text import BertTokenizer

    model_dir = pathlib.Path(model_dir)
    info = json.loads((model_dir / "task.json").read_text(encoding="utf-8"))
    model = keras.saving.load_model(model_dir / "model.keras")
    tokenizer = BertTokenizer(model_dir / "vocab.txt", lowercase=info.get("lowercase", True))
    return model, tokenizer, info


def evaluate_span_run(run_dir, split=None, data_dir=None, max_eval_examples=None):
    """`kbert evaluate` for a SQuAD or CoNLL run directory: the task's metrics on `split`
    (SQuAD: "dev", the default; CoNLL: "dev" or "test", default "test"), with the run's own
    settings. `max_eval_examples` takes the same fixed subset as fine-tuning does."""
    model, tokenizer, info = load_run(run_dir)
    task = info["task"]
    if task in SQUAD_TASKS:
        split = split or "dev"
        if split != "dev":
            raise ValueError("SQuAD has a public dev split only (the test set is hidden).")
        examples = _subset(squad_splits(info["version"], data_dir)["dev"], max_eval_examples,
                           EVAL_SEED)
        metrics, _, _ = evaluate_squad(
            model, tokenizer, examples, info["version"], info["sequence_length"],
            info["doc_stride"], info["max_query_length"], info["n_best"],
            info["max_answer_length"], info["null_threshold"])
        count = len(examples)
    else:
        from kbert.data.conll import conll2003, conll_features

        split = split or "test"
        sentences = _subset(conll2003(data_dir)[split], max_eval_examples, EVAL_SEED)
        features = conll_features(sentences, tokenizer, info["sequence_length"],
                                  info["label_names"])
        metrics, _ = evaluate_conll(model, features, sentences, info["label_names"])
        count = len(sentences)
    return {**metrics, "task": task, "split": split, "examples": count}


def predict_from_dir(model_dir, text=None, question=None, context=None, null_threshold=None):
    """`kbert predict` for a SQuAD or CoNLL run directory: with `question` and `context`, the
    answer (see `answer_questions`); with `text`, the entities (see `tag_entities`). Strings
    or equal-length lists."""
    model, tokenizer, info = load_run(model_dir)
    if info["task"] in SQUAD_TASKS:
        if question is None or context is None:
            raise ValueError(f"{model_dir} is a {info['task']} model: give question and context.")
        threshold = info["null_threshold"] if null_threshold is None else null_threshold
        return answer_questions(model, tokenizer, question, context, info["version"],
                                info["sequence_length"], info["doc_stride"],
                                info["max_query_length"], info["n_best"],
                                info["max_answer_length"], threshold)
    if text is None:
        raise ValueError(f"{model_dir} is a {info['task']} model: give text.")
    return tag_entities(model, tokenizer, text, info["label_names"], info["sequence_length"])
