"""CoNLL-2003 NER fine-tuning, entity-level evaluation, and tagging raw text
(`finetune_conll`, `evaluate_conll`, `tag_entities`)."""

import pathlib
import re
import time

import keras
import numpy as np

from kbert.training.finetune import EVAL_SEED, build_backbone
from kbert.training.optimizer import make_optimizer
from kbert.training.precision import dtype_policy, needs_loss_scale
from kbert.training.runs import (fit_with_logs, parameter_counts, save_run, steps_and_epochs,
                                 subset)


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
                   lstm_units=128, seed=0, verbose=1, splits=None, label_names=None,
                   mixed_precision=None):
    """Fine-tunes a `BertTokenClassifier` on CoNLL-2003 NER and scores entity-level
    precision / recall / F1 (seqeval's default mode) on dev and test.

    Arguments as `kbert.training.finetune` (max_train_examples / max_eval_examples count
    sentences; mixed_precision), plus:
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
    policy = dtype_policy(mixed_precision)
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    splits = splits or conll2003(data_dir, scheme)
    train = subset(splits["train"], max_train_examples, seed)
    held_out = {split: subset(splits[split], max_eval_examples, EVAL_SEED)
                for split in ("dev", "test") if splits.get(split)}
    if label_names is None:
        tags = {t for s in splits["train"] for t in s.tags}
        label_names = (CONLL2003_LABELS if tags <= set(CONLL2003_LABELS)
                       else ["O"] + sorted(tags - {"O"}))
    label_names = list(label_names)

    backbone, tokenizer = build_backbone(init, dtype=policy)
    feature_layers = (tuple(range(-min(4, backbone.config.num_layers), 0))
                      if mode == "feature" else None)
    model = BertTokenClassifier(backbone, label_names=label_names,
                                feature_layers=feature_layers, lstm_units=lstm_units)
    features = conll_features(train, tokenizer, sequence_length, label_names)
    epochs, steps_per_epoch = steps_and_epochs(len(train), batch_size, epochs, steps)
    model.compile(optimizer=make_optimizer(learning_rate, epochs * steps_per_epoch,
                                           warmup_fraction, weight_decay, model=model,
                                           loss_scale=needs_loss_scale(policy)))
    dataset = tagging_dataset(features, batch_size, shuffle=True, repeat=True, seed=seed,
                              bucket=True)
    history, train_seconds = fit_with_logs(model, dataset, epochs, steps_per_epoch, output_dir, verbose)

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
                     "weight_decay": weight_decay, "lstm_units": lstm_units, "seed": seed,
                     "mixed_precision": policy},
        "sizes": {"train": len(train), **{k: len(v) for k, v in held_out.items()},
                  "truncated_train_words": int(features["truncated_words"]),
                  **parameter_counts(backbone, model)},
        "final_train_loss": float(history.history["loss"][-1]),
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
    }
    task_info = {"task": "conll", "sequence_length": sequence_length,
                 "label_names": label_names}
    save_run(model, tokenizer, output_dir, task_info, metrics,
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


