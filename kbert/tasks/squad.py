"""`SquadTask`: SQuAD v1.1 / v2.0 extractive question answering as a spec for the one driver.

Windows over long contexts (`sequence_length`, `doc_stride`, `max_query_length`), the training
targets and the decoding of start/end logits back to answer text follow Google's run_squad.py
(`kbert.text.span_preprocessor`, `kbert.text.span_decoding`, graph ops shared with the
export); EM / F1 are the official script's (`kbert.evaluation.squad`).
"""

import numpy as np

from kbert.config import INPUT_KEYS
from kbert.config_checks import RowError
from kbert.models.span_labeler import MASKED_LOGIT, BertSpanLabeler
from kbert.tasks.spec import EVAL_SEED, TaskSpec, refuse_unread, sequence_predictions
from kbert.text.span_preprocessor import BertSpanPreprocessor

WINDOW_CHUNK = 2048  # questions windowed per graph call


def _answer_chars(example):
    """[start, end) characters of the example's first answer; (-1, -1) for none."""
    if not example.answers:
        return -1, -1
    text, start = example.answers[0]
    return start, start + len(text)


class SquadTask(TaskSpec):
    """SQuAD `version` "1.1" or "2.0" (v2.0 built from v1.1 when no v2.0 files are given), or
    one's own `files`: {"train", "dev", "test"} → a path or None, read by `squad_files` with
    `seed`."""

    kind = "span"
    model_classes = (BertSpanLabeler,)
    sequence_length = 384
    metric = "f1"

    def __init__(self, version="1.1", data_dir=None, doc_stride=128, max_query_length=64,
                 n_best=20, max_answer_length=30, null_threshold=0.0,
                 unanswerable_fraction=0.5, files=None, seed=0):
        from kbert.text.span_preprocessor import check_lengths

        if str(version) not in ("1.1", "2.0"):
            raise ValueError(f"version must be '1.1' or '2.0', got {version!r}.")
        check_lengths(self.sequence_length, max_query_length, doc_stride)
        self.version = str(version)
        self.name = "squad2" if self.version == "2.0" else "squad"
        self.data_dir = data_dir
        self.files = files  # {"train", "dev", "test"} → one's own files (`squad_files`)
        self.seed = seed
        self.options = {"doc_stride": doc_stride, "max_query_length": max_query_length,
                        "n_best": n_best, "max_answer_length": max_answer_length,
                        "null_threshold": null_threshold,
                        "unanswerable_fraction": unanswerable_fraction}
        self._splits = None
        self._train_windows = (None, None)  # (examples, windows): windowing 87k questions is slow

    def splits(self):
        """{"train", "dev"}: SQuAD's test set is hidden, so dev is the reported split."""
        if self._splits is None and self.files:
            from kbert.data.squad import squad_files

            self._splits, version = squad_files(**self.files, seed=self.seed)
            if version == "2.0" and self.version == "1.1":
                raise ValueError(f"{self.files['train']} holds SQuAD v2.0 questions (some "
                                 "unanswerable): fine-tune it as task squad2.")
        elif self._splits is None:
            self._splits = _squad_splits(self.version, self.data_dir,
                                         self.options["unanswerable_fraction"])
        return self._splits

    def build(self, backbone, tokenizer, sequence_length, mode="finetune"):
        return BertSpanLabeler(backbone, preprocessor=BertSpanPreprocessor(
            tokenizer, sequence_length, self.options["doc_stride"],
            self.options["max_query_length"]))

    def windows(self, model, examples, with_answers=False, require_questions=False):
        """The preprocessor's windows of `examples` as numpy arrays (in chunks, so that the
        tokenizer's intermediates stay small); `require_questions`: a blank question is a
        `RowError` naming its example."""
        chunks = []
        for i in range(0, len(examples), WINDOW_CHUNK):
            part = examples[i:i + WINDOW_CHUNK]
            answers = [_answer_chars(e) for e in part] if with_answers else None
            try:
                out = model.preprocessor.windows(
                    [e.question for e in part], [e.context for e in part],
                    *(zip(*answers) if answers else ()), require_questions=require_questions)
            except RowError as error:  # its row in the chunk → in `examples`
                raise RowError(error.template, error.row + i) from None
            out = {k: v.numpy() for k, v in out.items()}
            out["example_index"] = out["example_index"] + i
            chunks.append(out)
        return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}

    def train_size(self, examples, model):
        return len(self._training_windows(model, examples)["token_ids"])

    def _training_windows(self, model, examples):
        """The training questions' answerable windows, kept for the next call."""
        if self._train_windows[0] is not examples:
            self._train_windows = (examples, self._answerable_windows(model, examples))
        return self._train_windows[1]

    def _answerable_windows(self, model, examples):
        """Every window of `examples`, except those of answers that cover no sub-token (they
        would teach "no answer")."""
        w = self.windows(model, examples, with_answers=True)
        keep = w["unmappable"] == 0
        return {k: v[keep] for k, v in w.items()}

    def train_dataset(self, model, examples, batch_size, seed, pad_to_multiple_of=1):
        """Batches of whole windows, never cut: nearly every batch holds a full-length window
        (8,000 training questions at length 256: 9.6% of windows are full, so 96% of batches of
        32), and one fixed length lets kbert's rule compile the step with XLA, whose step took
        9.5 s against 14.2 s without (MiniLM, batch 32, length 256). `pad_to_multiple_of` has
        nothing to round."""
        import tensorflow as tf

        from kbert.text.datasets import prefetched

        w = self._training_windows(model, examples)
        dataset = tf.data.Dataset.from_tensor_slices(self._inputs_and_targets(w))
        dataset = dataset.shuffle(len(w["token_ids"]), seed=seed,
                                  reshuffle_each_iteration=True).repeat()
        return prefetched(dataset.batch(batch_size, drop_remainder=True))

    def validation_dataset(self, model, examples, batch_size):
        """The dev windows in training's fixed-length form (a validation pass of another form
        would switch the compiled step between epochs)."""
        import tensorflow as tf

        from kbert.text.datasets import prefetched

        targets = self._inputs_and_targets(self._answerable_windows(model, examples))
        return prefetched(tf.data.Dataset.from_tensor_slices(targets).batch(batch_size))

    @staticmethod
    def _inputs_and_targets(w):
        return ({k: w[k] for k in INPUT_KEYS},
                {"start_logits": w["start_positions"], "end_logits": w["end_positions"]})

    def logits(self, model, windows, batch_size=64):
        """(start, end) logits [W, sequence_length] (`sequence_predictions`: padding the
        masked value)."""
        out = sequence_predictions(model, windows, batch_size, fill=MASKED_LOGIT)
        return out["start_logits"], out["end_logits"]

    def answers(self, model, questions, contexts, batch_size=64, version=None,
                null_threshold=None, require_questions=False):
        """`kbert.text.span_decoding.decode_spans` of the model's logits, as numpy arrays, and
        the number of windows; `version` and `null_threshold` override the run's."""
        from kbert.data.squad import SquadExample
        from kbert.text.span_decoding import decode_spans

        examples = [SquadExample(str(n), q, c) for n, (q, c) in
                    enumerate(zip(questions, contexts))]
        windows = self.windows(model, examples, require_questions=require_questions)
        start, end = self.logits(model, windows, batch_size)
        threshold = self.options["null_threshold"] if null_threshold is None else null_threshold
        found = decode_spans(start, end, windows, list(contexts), version or self.version,
                             self.options["n_best"], self.options["max_answer_length"],
                             threshold)
        return {k: v.numpy() for k, v in found.items()}, len(windows["token_ids"])

    def evaluate(self, model, examples, batch_size=64):
        from kbert.data.squad import references
        from kbert.evaluation.squad import best_null_threshold, squad_metrics

        questions, contexts = [e.question for e in examples], [e.context for e in examples]
        found, windows = self.answers(model, questions, contexts, batch_size)
        predictions = {e.id: a.decode() for e, a in zip(examples, found["answer"])}
        gold = references(examples)
        metrics = squad_metrics(predictions, gold, self.version)
        if self.version == "2.0":
            best, _ = self.answers(model, questions, contexts, batch_size, version="1.1")
            scored = [n for n, s in enumerate(best["score"]) if np.isfinite(s)]
            if scored:
                threshold, top = best_null_threshold(
                    {examples[n].id: float(best["null_score_diff"][n]) for n in scored},
                    {examples[n].id: best["answer"][n].decode() for n in scored}, gold)
                metrics.update(best_f1_threshold=threshold, best_f1=top)
            metrics["null_threshold"] = self.options["null_threshold"]
        metrics["features"] = int(windows)
        return metrics, predictions

    def predict(self, model, question=None, context=None, null_threshold=None, **unused):
        """The answer text, its character span in the context, and its score (v2.0: "" and
        -1 when the null score beats it by more than the threshold)."""
        if question is None or context is None:
            raise ValueError(f"A {self.name} model needs question and context.")
        refuse_unread(self.name, unused)
        single = isinstance(question, str)
        questions, contexts = ([question], [context]) if single else (question, context)
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts.")
        # A blank question asks nothing: refused, as the export refuses it.
        found, _ = self.answers(model, questions, contexts, null_threshold=null_threshold,
                                require_questions=True)
        answers = [{"answer": a.decode(), "start": int(s), "end": int(e),
                    "score": float(score) if np.isfinite(score) else None,
                    "null_score_diff": float(diff) if np.isfinite(diff) else None}
                   for a, s, e, score, diff in zip(found["answer"], found["start_char"],
                                                   found["end_char"], found["score"],
                                                   found["null_score_diff"])]
        return answers[0] if single else answers

    def info(self):
        files = {"files": self.files, "seed": self.seed} if self.files else {}
        return {"version": self.version, "task_options": {**self.options, **files},
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

