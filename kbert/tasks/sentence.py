"""`SentenceTask`: single sentences, sentence pairs, regression and multiple choice (the
`kbert.data.tasks` readers) as a spec for the one driver."""

import numpy as np

from kbert.config_checks import RowError
from kbert.models import BertClassifier, BertFeatureClassifier, BertMultipleChoice
from kbert.models.xla import pad_multiple
from kbert.tasks.spec import TaskSpec, head_in_task_order, refuse_unread
from kbert.text.preprocessor import BertPreprocessor


def _model_inputs(examples, kind):
    """Raw model inputs for `examples`: strings, a pair of string lists, or (questions, choices)."""
    texts = [t for t, _ in examples]
    if kind == "multiple_choice":
        return ([q for q, _ in texts], [list(c) for _, c in texts])
    if isinstance(texts[0], tuple):
        return tuple(list(column) for column in zip(*texts))
    return texts


class SentenceTask(TaskSpec):
    """A `kbert.data.tasks.TaskData` (classification, regression, multiple choice); `options`:
    the keywords that read it again from one's own files (`kbert.tasks.own_files.own_task`),
    kept in run.json."""

    modes = ("finetune", "feature")

    def __init__(self, task, cli_name=None, data_dir=None, options=None):
        self.task = task
        self.options = options  # how to read one's own files again (`own_task`'s keywords)
        self.name = cli_name or task.name
        self.kind = task.kind
        self.metric = task.metric
        self.data_dir = data_dir

    @classmethod
    def from_run(cls, info):
        """The spec a run directory's run.json describes, built without reading its data: it
        builds and answers like the spec that trained the run, wherever the run is copied."""
        from kbert.data.tasks import TaskData

        missing = [k for k in ("num_classes", "sentence_pair") if k not in info]
        if missing:
            raise ValueError(f"run.json of task {info['task']!r} lacks {', '.join(missing)}: "
                             "it was not written by kbert finetune.")
        names = info.get("label_names")
        task = TaskData(info["task"], info["kind"], info["num_classes"], splits={},
                        label_names=tuple(names) if names else None,
                        is_pair=info["sentence_pair"])
        return cls(task, data_dir=info.get("data_dir"))

    def splits(self):
        return self.task.splits

    @property
    def model_classes(self):
        if self.kind == "multiple_choice":
            return (BertMultipleChoice,)
        if self.kind == "regression":
            return (BertClassifier,)
        return (BertClassifier, BertFeatureClassifier)

    def fit_to(self, model, label_names=None):
        """Besides the head's kind, its number of outputs must be the task's; a classifier whose
        `label_names` are this task's, in another order or case, has its head's columns put in
        the task's order (as transformers' run_glue.py matches `label2id` to a dataset's
        labels); other names are the model's own, so its ids are read as the task's, with a
        warning that says so (run_glue.py's rule too)."""
        super().fit_to(model)
        multiple_choice = self.kind == "multiple_choice"
        count = model.num_choices if multiple_choice else model.num_classes
        if count != self.task.num_classes:
            what = "choices" if multiple_choice else "outputs"
            raise ValueError(f"Task {self.name!r} has {self.task.num_classes} {what}; the "
                             f"model has {count}.")
        if label_names and self.task.label_names and self.kind == "classification":
            _align_labels(model, [str(n) for n in label_names], list(self.task.label_names))

    def build(self, backbone, tokenizer, sequence_length, mode="finetune"):
        pre = BertPreprocessor(tokenizer, sequence_length=sequence_length)
        if mode == "feature":
            if self.kind != "classification":
                raise ValueError("mode='feature' supports classification tasks only.")
            layers = tuple(range(-min(4, backbone.config.num_layers), 0))
            return BertFeatureClassifier(backbone, num_classes=self.task.num_classes,
                                         layers=layers, preprocessor=pre)
        if self.kind == "multiple_choice":
            return BertMultipleChoice(backbone, num_choices=self.task.num_classes,
                                      preprocessor=pre)
        return BertClassifier(backbone, num_classes=self.task.num_classes, preprocessor=pre)

    def train_dataset(self, model, examples, batch_size, seed, pad_to_multiple_of=1):
        from kbert.data.tasks import make_dataset

        return make_dataset(examples, model.preprocessor, batch_size, self.kind, shuffle=True,
                            bucket=True, repeat=True, seed=seed,
                            pad_to_multiple_of=pad_to_multiple_of)

    def validation_dataset(self, model, examples, batch_size):
        from kbert.data.tasks import make_dataset

        return make_dataset(examples, model.preprocessor, batch_size, self.kind,
                            pad_to_multiple_of=pad_multiple(model))

    def outputs(self, model, examples, batch_size=64):
        """Logits for `examples` (scores for regression), in order."""
        outputs = model.predict(_model_inputs(examples, self.kind), batch_size=batch_size,
                                verbose=0)
        return outputs.reshape(-1) if self.kind == "regression" else outputs

    def evaluate(self, model, examples, batch_size=64):
        from kbert.evaluation.classification import (accuracy, classification_metrics,
                                                     regression_metrics)

        outputs = self.outputs(model, examples, batch_size)
        labels = np.asarray([y for _, y in examples])
        if self.kind == "regression":
            return regression_metrics(labels, outputs), None
        predictions = outputs.argmax(-1)
        if self.kind == "multiple_choice":
            return {"accuracy": accuracy(labels, predictions)}, None
        return classification_metrics(labels, predictions, self.task.num_classes), None

    def predict(self, model, text=None, text_pair=None, choices=None, **unused):
        """Labels (or scores) with probabilities for raw `text` (a string or a list)."""
        import keras

        refuse_unread(self.name, {**unused, **({"text_pair": text_pair}
                                               if self.kind == "multiple_choice"
                                               else {"choices": choices})})
        if text is None:
            raise ValueError(f"A {self.name} model needs text.")
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        if self.kind == "multiple_choice":
            if choices is None:
                raise ValueError(f"A {self.name} model needs choices for each text.")
            x = (texts, [list(choices)] if single else [list(c) for c in choices])
            for n, (text, row) in enumerate(zip(*x)):
                if len(row) != self.task.num_classes:
                    raise RowError(f"A {self.name} model takes {self.task.num_classes} "
                                   "choices a text; {where} has "
                                   f"{len(row)} ({text[:60]!r}).", n)
        elif self.task.is_pair not in (None, text_pair is not None):  # None: either
            # A pair model fed one sentence (or the reverse) answers, but about other input.
            raise ValueError(f"A {self.name} model reads sentence pairs: give text_pair too."
                             if self.task.is_pair else
                             f"A {self.name} model reads single sentences: text_pair does not "
                             "apply.")
        elif text_pair is not None:
            x = (texts, [text_pair] if single else list(text_pair))
        else:
            x = texts
        outputs = np.asarray(model.predict(x, verbose=0), "float32")
        if self.kind == "regression":
            answers = [{"score": float(s)} for s in outputs.reshape(-1)]
        else:
            probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(outputs, -1))
            names = self.task.label_names or [str(i) for i in range(outputs.shape[-1])]
            answers = [{"label": names[int(p.argmax())], "label_id": int(p.argmax()),
                        "probabilities": [round(float(v), 6) for v in p]}
                       for p in probabilities]
        return answers[0] if single else answers

    def info(self):
        return {"label_names": list(self.task.label_names) if self.task.label_names else None,
                "num_classes": self.task.num_classes, "sentence_pair": self.task.is_pair,
                "data_dir": None if self.data_dir is None else str(self.data_dir),
                **({"task_options": self.options} if self.options else {})}


def _align_labels(model, model_names, task_names):
    """Puts the classifier's output columns in the task's label order (`head_in_task_order`)."""
    head = model.get_layer("classifier")
    head.set_weights(head_in_task_order(*head.get_weights(), model_names, task_names))
