"""Fine-tuning and prediction for the span and tagging tasks: SQuAD v1.1 / v2.0 and CoNLL-2003.

The runs themselves live in `finetune_squad` and `finetune_conll`; this module dispatches.

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

__all__ = ["finetune_task", "finetune_squad", "finetune_conll", "evaluate_span_run",
           "predict_from_dir", "answer_questions", "tag_entities", "evaluate_squad",
           "evaluate_conll", "squad_splits", "split_words", "load_run"]

import json
import pathlib

import keras

from kbert.training.finetune import EVAL_SEED
from kbert.training.finetune_conll import (evaluate_conll, finetune_conll, split_words,
                                           tag_entities)
from kbert.training.finetune_squad import (SQUAD_TASKS, answer_questions, evaluate_squad,
                                           finetune_squad, squad_splits)
from kbert.training.runs import subset


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
    model = keras.saving.load_model(model_dir / "model.keras", compile=False)
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
        examples = subset(squad_splits(info["version"], data_dir)["dev"], max_eval_examples,
                           EVAL_SEED)
        metrics, _, _ = evaluate_squad(
            model, tokenizer, examples, info["version"], info["sequence_length"],
            info["doc_stride"], info["max_query_length"], info["n_best"],
            info["max_answer_length"], info["null_threshold"])
        count = len(examples)
    else:
        from kbert.data.conll import conll2003, conll_features

        split = split or "test"
        sentences = subset(conll2003(data_dir)[split], max_eval_examples, EVAL_SEED)
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
