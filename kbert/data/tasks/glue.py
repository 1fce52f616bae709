"""GLUE's TSV layouts (CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI)."""

import os
import pathlib

from kbert.data.tasks.common import DataError, TaskData, check_text, parse_label
from kbert.text.utf8 import read_utf8


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
    lines = read_utf8(path).split("\n")
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
            texts.append(check_text(path, line, value, column))
        if label_col[1] is None:
            label = None
        else:
            value = row[label_col[1]] if label_col[1] < len(row) else None
            label = parse_label(path, line, value, labels, labels is None, label_col[0])
        examples.append((texts[0] if len(texts) == 1 else tuple(texts), label))
    return name, examples


def read_glue_dir(directory, task=None):
    """A `TaskData` from a GLUE task directory: train.tsv, dev.tsv (MNLI: dev_matched.tsv) and,
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
    return TaskData(name=name, kind="regression" if labels is None else "classification",
                    num_classes=1 if labels is None else len(labels), splits=splits,
                    label_names=labels, description=f"GLUE {name} from {directory}")
