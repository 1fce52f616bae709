"""`ConllTask`: CoNLL-2003 NER as a spec for the one driver.

Features come from `BertTokenPreprocessor` (word → word-piece alignment in the graph), the
tags from `kbert.text.entity_decoding` (the same graph ops the export serves), and the scores
from `kbert.evaluation.entities` (equal to seqeval's default mode).
"""

from kbert.models import BertTokenClassifier
from kbert.models.xla import pad_multiple
from kbert.tasks.spec import TaskSpec, refuse_unread, sequence_predictions
from kbert.text.token_preprocessor import BertTokenPreprocessor


BATCHING = ("length", "random")


class ConllTask(TaskSpec):
    """Token tagging on CoNLL-2003 (or files in its format under `data_dir`, or one's own
    `files`: {"train", "dev", "test"} → a path or None, read by `conll_files` with `seed`).

    `batching` chooses how training batches are drawn: "random" (the default) draws them
    uniformly (`random_batches`: Hugging Face's way), "length" groups sentences of similar
    length (`length_bucketed`: the least padding, the fastest). The loss is a mean over each
    batch's labelled tokens, so in a batch of short sentences each token weighs more, and
    random batches score higher (benchmarks/results/conll-400-steps.json).
    """

    name = "conll"
    kind = "token_classification"
    metric = "f1"
    modes = ("finetune", "feature")
    model_classes = (BertTokenClassifier,)

    def __init__(self, data_dir=None, scheme="auto", label_names=None, lstm_units=128,
                 batching="random", files=None, seed=0):
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {BATCHING}, got {batching!r}.")
        self.batching = batching
        self.data_dir = data_dir
        self.files = files  # {"train", "dev", "test"} → one's own files (`conll_files`)
        self.seed = seed
        self.scheme = scheme
        self.lstm_units = lstm_units
        self._label_names = None if label_names is None else list(label_names)
        self._splits = None

    def splits(self):
        if self._splits is None and self.files:
            from kbert.data.conll import conll_files

            self._splits = conll_files(**self.files, scheme=self.scheme, seed=self.seed)
        elif self._splits is None:
            from kbert.data.conll import conll2003

            self._splits = conll2003(self.data_dir, self.scheme)
        return self._splits

    @property
    def label_names(self):
        if self._label_names is None:
            from kbert.data.conll import CONLL2003_LABELS

            tags = {t for s in self.splits()["train"] for t in s.tags}
            self._label_names = (list(CONLL2003_LABELS) if tags <= set(CONLL2003_LABELS)
                                 else ["O"] + sorted(tags - {"O"}))
        return self._label_names

    def fit_to(self, model, label_names=None):
        """A tagger decodes by its own tag order (its saved `label_names`), whatever order the
        data's tags would give; a tag of the data it lacks is named when features are made."""
        super().fit_to(model)
        if model.label_names is not None:
            self._label_names = list(model.label_names)

    def build(self, backbone, tokenizer, sequence_length, mode="finetune"):
        layers = (tuple(range(-min(4, backbone.config.num_layers), 0))
                  if mode == "feature" else None)
        return BertTokenClassifier(
            backbone, label_names=self.label_names, feature_layers=layers,
            lstm_units=self.lstm_units,
            preprocessor=BertTokenPreprocessor(tokenizer, sequence_length=sequence_length))

    def rows(self, model, sentences):
        """(inputs, labels, label_weights) of `sentences`, packed by the model's preprocessor,
        as numpy arrays."""
        import tensorflow as tf

        self._check_tags(sentences)
        index = {name: i for i, name in enumerate(self.label_names)}
        words = tf.ragged.constant([s.words for s in sentences], tf.string)
        labels = tf.ragged.constant([[index[t] for t in s.tags] for s in sentences], tf.int32)
        return tf.nest.map_structure(lambda t: t.numpy(), model.preprocessor(words, labels))

    def _check_tags(self, sentences):
        from kbert.data.tasks import DataError

        known = set(self.label_names)
        for s in sentences:
            unknown = [t for t in s.tags if t not in known]
            if unknown:
                raise DataError(f"{s.source}: tag {unknown[0]!r} is not one of "
                                f"{self.label_names}.")

    def train_dataset(self, model, examples, batch_size, seed, pad_to_multiple_of=1):
        from kbert.text.datasets import length_bucketed, random_batches

        rows = self.rows(model, examples)
        if self.batching == "random":
            return random_batches(rows, batch_size, seed, pad_to_multiple_of)
        return length_bucketed(rows, rows[0]["padding_mask"], batch_size, seed,
                               pad_to_multiple_of)

    def validation_dataset(self, model, examples, batch_size):
        import tensorflow as tf

        from kbert.text.datasets import length_order, packed_batches

        rows = self.rows(model, examples)
        order = length_order(rows[0]["padding_mask"])
        return packed_batches(tf.nest.map_structure(lambda v: v[order], rows), batch_size,
                              pad_multiple(model))

    def logits(self, model, features, batch_size=64):
        """Token logits [count, seq, classes] (`sequence_predictions`: padding 0)."""
        return sequence_predictions(model, features, batch_size)

    def windows(self, model, words, batch_size=64):
        """(windows, logits): `words` (ragged string [batch, None]) in the preprocessor's
        `windows`, as numpy arrays, and the model's logits of each."""
        windows = {k: v.numpy() for k, v in model.preprocessor.windows(words).items()}
        return windows, self.logits(model, windows, batch_size)

    def evaluate(self, model, examples, batch_size=64):
        """Entity scores of every word, long sentences in windows as `predict` tags them."""
        import tensorflow as tf

        from kbert.evaluation.entities import entity_metrics
        from kbert.text.entity_decoding import word_tags

        self._check_tags(examples)
        words = tf.ragged.constant([s.words for s in examples], tf.string)
        windows, logits = self.windows(model, words, batch_size)
        tags = word_tags(logits, windows["word_index"], words.row_lengths(), self.label_names,
                         windows["example_index"])
        predicted = [[t.decode() for t in row] for row in tags.to_list()]
        metrics = entity_metrics([s.tags for s in examples], predicted)
        metrics["truncated_words"] = int(words.flat_values.shape[0]
                                         - (windows["word_index"] >= 0).sum())
        return metrics, [{"words": s.words, "gold": s.tags, "predicted": p}
                         for s, p in zip(examples, predicted)]

    def predict(self, model, text=None, batch_size=64, **unused):
        """Entities ({"text", "type", "start", "end"}: character span) in raw `text`; a text
        longer than one row in windows (`BertTokenPreprocessor.windows`), as the export tags
        it."""
        import tensorflow as tf

        from kbert.text.entity_decoding import decode_entities

        if text is None:
            raise ValueError("A conll model needs text.")
        refuse_unread(self.name, unused)
        single = isinstance(text, str)
        if not single and not len(text):
            return []
        pre = model.preprocessor
        words, starts, ends, clean = pre.split_text(
            tf.constant([text] if single else list(text), tf.string), pre.max_context_length)
        windows, logits = self.windows(model, words, batch_size)
        found = decode_entities(logits, windows["word_index"], starts, ends, clean,
                                self.label_names, windows["example_index"])
        columns = [found[f"entity_{n}"].numpy() for n in ("text", "label", "start", "end")]
        answers = [[{"text": t.decode(), "type": k.decode(), "start": int(s), "end": int(e)}
                    for t, k, s, e in zip(*(c[i][:count] for c in columns))]
                   for i, count in enumerate(found["entity_count"].numpy())]
        return answers[0] if single else answers

    def info(self):
        return {"label_names": self.label_names,
                "task_options": {"scheme": self.scheme, "label_names": self.label_names,
                                 "lstm_units": self.lstm_units, "batching": self.batching,
                                 **({"files": self.files, "seed": self.seed}
                                    if self.files else {})},
                "data_dir": None if self.data_dir is None else str(self.data_dir)}
