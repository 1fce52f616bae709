"""The shared pieces of every task reader: `TaskData`, `DataError` and row checks."""

import dataclasses
import json
import zlib

import numpy as np


class DataError(ValueError):
    """A data file that cannot be read as the task's format."""


def fail(path, line, message):
    raise DataError(f"{path}:{line}: {message}")


def jsonl_records(path, lines):
    """(line number, object) for each non-blank line of a JSONL file's `lines`; anything but a
    JSON object is an error naming the line."""
    for line, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as e:
            fail(path, line, f"not valid JSON: {e.msg}.")
        if not isinstance(record, dict):
            fail(path, line, "a JSONL line must hold an object.")
        yield line, record


@dataclasses.dataclass
class TaskData:
    """One fine-tuning data set.

    kind: "classification", "regression" or "multiple_choice". `num_classes` is the number of
    labels (1 for regression, the number of choices for multiple choice). `splits` maps "train",
    "dev" and, where the task has one, "test" to lists of examples; it is empty in the task a
    run directory describes (`SentenceTask.from_run`), which answers but holds no data.
    """

    name: str
    kind: str
    num_classes: int
    splits: dict
    label_names: tuple = None
    description: str = ""
    is_pair: bool = None  # sentence pairs; None: read from the first example, or, with none,
    # unknown (the task of a checkpoint fine-tuned elsewhere: it answers either)

    def __post_init__(self):
        if self.is_pair is None and any(self.splits.values()):
            first = next((rows[0][0] for rows in self.splits.values() if rows), None)
            self.is_pair = isinstance(first, tuple) and self.kind != "multiple_choice"

    @property
    def metric(self):
        """The dev metric used to pick among runs."""
        return "pearson" if self.kind == "regression" else "accuracy"


def split_of(key: str) -> str:
    bucket = zlib.crc32(key.encode("utf-8")) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def check_text(path, line, value, column):
    if value is None:
        fail(path, line, f"missing column {column!r}.")
    if not isinstance(value, str):
        fail(path, line, f"column {column!r} is not text: {value!r}.")
    if not value.strip():
        fail(path, line, f"empty text in column {column!r}.")
    return value


def parse_label(path, line, value, label_names, regression, column):
    if value is None or (isinstance(value, str) and not value.strip()):
        fail(path, line, f"missing label in column {column!r}.")
    if regression:
        try:
            score = float(value)
        except (TypeError, ValueError):
            fail(path, line, f"label {value!r} in column {column!r} is not a number.")
        if not np.isfinite(score):
            fail(path, line, f"label {value!r} in column {column!r} is not finite.")
        return score
    key = value if isinstance(value, str) else json.dumps(value)
    key = key.strip()
    if label_names is not None:
        if key not in label_names:
            fail(path, line, f"unknown label {key!r} in column {column!r}; "
                              f"expected one of {list(label_names)}.")
        return label_names.index(key)
    try:
        label = int(key)
    except ValueError:
        fail(path, line, f"label {key!r} in column {column!r} is not a class id; "
                          "pass label_names to map label strings to ids.")
    if label < 0:
        fail(path, line, f"label {label} in column {column!r} is negative.")
    return label
