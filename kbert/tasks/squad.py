"""`SquadTask`: SQuAD v1.1 / v2.0 extractive question answering as a spec for the one driver.

Windows over long contexts (`sequence_length`, `doc_stride`, `max_query_length`), the training
targets and the decoding of start/end logits back to answer text follow Google's run_squad.py
(see `kbert.data.squad`); EM / F1 are the official script's (`kbert.evaluation.squad`).
"""

from kbert.tasks.spec import EVAL_SEED, TaskSpec

INPUT_KEYS = ("token_ids", "segment_ids", "padding_mask")
DECODING = ("n_best", "max_answer_length", "null_threshold")


class SquadTask(TaskSpec):
    """SQuAD `version` "1.1" or "2.0" (v2.0 built from v1.1 when no v2.0 files are given)."""

    kind = "span"
    sequence_length = 384
    metric = "f1"

    def __init__(self, version="1.1", data_dir=None, doc_stride=128, max_query_length=64,
                 n_best=20, max_answer_length=30, null_threshold=0.0,
                 unanswerable_fraction=0.5):
        from kbert.data.squad import check_lengths

        if str(version) not in ("1.1", "2.0"):
            raise ValueError(f"version must be '1.1' or '2.0', got {version!r}.")
        check_lengths(self.sequence_length, max_query_length, doc_stride)
        self.version = str(version)
        self.name = "squad2" if self.version == "2.0" else "squad"
        self.data_dir = data_dir
        self.options = {"doc_stride": doc_stride, "max_query_length": max_query_length,
                        "n_best": n_best, "max_answer_length": max_answer_length,
                        "null_threshold": null_threshold,
                        "unanswerable_fraction": unanswerable_fraction}
        self._splits = None
        self._train_windows = (None, None)  # (examples, windows): windowing 87k questions is slow

    def splits(self):
        """{"train", "dev"}: SQuAD's test set is hidden, so dev is the reported split."""
        if self._splits is None:
            self._splits = _squad_splits(self.version, self.data_dir,
                                         self.options["unanswerable_fraction"])
        return self._splits

    def build(self, backbone, tokenizer, sequence_length, mode="finetune"):
        from kbert.data.squad import check_lengths
        from kbert.models import BertSpanLabeler
        from kbert.text import BertPreprocessor

        check_lengths(sequence_length, self.options["max_query_length"],
                      self.options["doc_stride"])
        return BertSpanLabeler(backbone, preprocessor=BertPreprocessor(
            tokenizer, sequence_length=sequence_length, truncate="waterfall"))

    def windows(self, model, examples):
        """The windowed features of `examples` (see `kbert.data.squad.squad_features`)."""
        from kbert.data.squad import squad_features

        pre = model.preprocessor
        return squad_features(examples, pre.tokenizer, pre.sequence_length,
                              self.options["doc_stride"], self.options["max_query_length"])

    def train_size(self, examples, model):
        return len(self._training_windows(model, examples)["token_ids"])

    def _training_windows(self, model, examples):
        from kbert.data.squad import training_features

        if self._train_windows[0] is not examples:
            self._train_windows = (examples, training_features(
                examples, self.windows(model, examples)))
        return self._train_windows[1]

    def train_dataset(self, model, examples, batch_size, seed, pad_to_multiple_of=1):
        import tensorflow as tf

        from kbert.text.trim import trim_to_longest

        f = self._training_windows(model, examples)
        dataset = tf.data.Dataset.from_tensor_slices((
            {k: f[k] for k in INPUT_KEYS},
            {"start_logits": f["start_positions"], "end_logits": f["end_positions"]}))
        dataset = dataset.shuffle(len(f["token_ids"]), seed=seed,
                                  reshuffle_each_iteration=True).repeat().batch(batch_size)
        return dataset.map(lambda x, y: (trim_to_longest(x, pad_to_multiple_of), y),
                           num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def answers(self, model, examples, batch_size=64, null_threshold=None):
        """(features, (predictions, details)) as `kbert.data.squad.decode_answers` gives
        them; `null_threshold` overrides the run's."""
        from kbert.data.squad import decode_answers, predict_logits

        features = self.windows(model, examples)
        start, end = predict_logits(model, features, batch_size)
        decoding = {**{k: self.options[k] for k in DECODING},
                    **({} if null_threshold is None else {"null_threshold": null_threshold})}
        return features, decode_answers(examples, features, start, end, self.version,
                                        **decoding)

    def evaluate(self, model, examples, batch_size=64):
        from kbert.data.squad import references
        from kbert.evaluation.squad import best_null_threshold, squad_metrics

        features, (predictions, details) = self.answers(model, examples, batch_size)
        gold = references(examples)
        metrics = squad_metrics(predictions, gold, self.version)
        if self.version == "2.0":
            diffs = {q: d["null_score_diff"] for q, d in details.items()
                     if d["null_score_diff"] is not None}
            if diffs:
                threshold, best = best_null_threshold(
                    diffs, {q: details[q]["best_text"] for q in diffs}, gold)
                metrics.update(best_f1_threshold=threshold, best_f1=best)
            metrics["null_threshold"] = self.options["null_threshold"]
        metrics["features"] = int(len(features["token_ids"]))
        return metrics, predictions

    def predict(self, model, question=None, context=None, null_threshold=None, **unused):
        """The answer text, its character span in the context, and its score (v2.0: "" and
        -1 when the null score beats it by more than the threshold)."""
        from kbert.data.squad import SquadExample

        if question is None or context is None:
            raise ValueError(f"A {self.name} model needs question and context.")
        single = isinstance(question, str)
        questions, contexts = ([question], [context]) if single else (question, context)
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts.")
        for n, (q, c) in enumerate(zip(questions, contexts)):
            if not q.strip() or not c.strip():
                raise ValueError(f"Question and context {n} must not be empty.")
        examples = [SquadExample(str(n), q, c) for n, (q, c) in
                    enumerate(zip(questions, contexts))]
        _, (_, details) = self.answers(model, examples, null_threshold=null_threshold)
        answers = [{"answer": d["text"], "start": d["start"], "end": d["end"],
                    "score": d["score"], "null_score_diff": d["null_score_diff"]}
                   for d in (details[e.id] for e in examples)]
        return answers[0] if single else answers

    def info(self):
        return {"version": self.version, "task_options": dict(self.options),
                "data_dir": None if self.data_dir is None else str(self.data_dir)}


def _squad_splits(version, data_dir, unanswerable_fraction):
    """v1.1 reads train-v1.1.json / dev-v1.1.json (fetched when `data_dir` is None); v2.0 reads
    train-v2.0.json / dev-v2.0.json when present, else builds v2.0-style splits from v1.1 with
    `add_unanswerable` (fixed seeds)."""
    import pathlib

    from kbert.data.squad import add_unanswerable, read_squad

    if data_dir is None:
        from kbert.data.sources import fetch

        data_dir = fetch("squad")
    data_dir = pathlib.Path(data_dir)
    if version == "2.0" and (data_dir / "train-v2.0.json").exists():
        return {split: read_squad(data_dir / f"{split}-v2.0.json")[0]
                for split in ("train", "dev")}
    splits = {split: read_squad(data_dir / f"{split}-v1.1.json")[0]
              for split in ("train", "dev")}
    if version == "2.0":
        splits = {"train": add_unanswerable(splits["train"], unanswerable_fraction, seed=0),
                  "dev": add_unanswerable(splits["dev"], unanswerable_fraction,
                                          seed=EVAL_SEED)}
    return splits

