"""CSV, TSV and JSONL files with named text / text-pair / label columns."""

import csv
import io
import os
import pathlib

from kbert.data.tasks.common import (DataError, TaskData, check_text, fail, hold_out,
                                     jsonl_records, label_id, label_kind, parse_label)
from kbert.text.utf8 import read_utf8, utf8_lines

DEFAULT_PAIR_COLUMN = "text_pair"
"""The second text of a pair, read when a file has this column and no other is named."""


def table_format(path, format=None):
    """"csv", "tsv" or "jsonl": `format`, else the file's extension (.json is JSON Lines)."""
    format = format or pathlib.Path(path).suffix.lstrip(".").lower()
    format = "jsonl" if format == "json" else format
    if format not in ("csv", "tsv", "jsonl"):
        raise DataError(f"{path}: unknown table format {format!r}; use csv, tsv or jsonl.")
    return format


def table_records(path, columns, format=None):
    """(line, record) for each row of a CSV / TSV file with a header row, or a JSONL file;
    `record` maps column names to values. A CSV or TSV header that lacks one of `columns`,
    an empty file and a row with more fields than the header are refused, naming the line."""
    path = os.fspath(path)
    format = table_format(path, format)
    if format == "jsonl":
        yield from jsonl_records(path, utf8_lines(path))
        return
    with io.StringIO(read_utf8(path), newline="") as f:
        reader = csv.DictReader(f, delimiter="," if format == "csv" else "\t")
        if reader.fieldnames is None:
            raise DataError(f"{path}: empty file.")
        missing = [c for c in columns if c not in reader.fieldnames]
        if missing:
            fail(path, 1, f"header lacks the columns {missing}; header is "
                          f"{reader.fieldnames}.")
        start = reader.line_num + 1
        for record in reader:
            line = start
            start = reader.line_num + 1
            if None in record:
                fail(path, line, f"more fields than the header's {len(reader.fieldnames)}.")
            yield line, record


def read_table(path, text_column="text", text_pair_column=None, label_column="label",
               label_names=None, regression=False, format=None):
    """Examples from a CSV, TSV (with a header row) or JSONL file with named columns.

    Labels are mapped through `label_names` (a sequence of label strings in id order) when
    given, read as integer class ids otherwise, or as floats with `regression=True`.
    `format` ("csv", "tsv", "jsonl") defaults to the file extension.
    """
    path = os.fspath(path)
    label_names = tuple(str(n) for n in label_names) if label_names is not None else None
    rows = _text_rows(path, text_column, text_pair_column, label_column, format)
    return [(texts, parse_label(path, line, label, label_names, regression, label_column))
            for line, texts, label in rows]


def _text_rows(path, text_column, text_pair_column, label_column, format=None):
    """(line, text or (text, text_pair), raw label) of each row; `DataError` for no rows."""
    columns = [text_column] + ([text_pair_column] if text_pair_column else [])
    rows = []
    for line, record in table_records(path, columns + [label_column], format):
        texts = tuple(check_text(path, line, record.get(c), c) for c in columns)
        rows.append((line, texts[0] if len(texts) == 1 else texts, record.get(label_column)))
    if not rows:
        raise DataError(f"{path}: no examples.")
    return rows


def pair_column(path, text_pair_column=None, format=None):
    """The pair column to read: `text_pair_column` when named, else `DEFAULT_PAIR_COLUMN` when
    the file's header (or first JSON Lines record) has it, else None (single sentences)."""
    if text_pair_column:
        return text_pair_column
    for _, record in table_records(path, [], format):
        return DEFAULT_PAIR_COLUMN if DEFAULT_PAIR_COLUMN in record else None
    return None


def table_task(train, dev=None, test=None, name="custom", num_classes=None, seed=0, **columns):
    """A `TaskData` from user files read with `read_table` (the same `columns` for each).

    Without `label_names`, `regression` or `num_classes`, the training file's labels decide
    (`label_kind`): names, sorted, for classification, or a regression where some label is a
    number that is not an integer; the dev and test files may only hold the training labels.
    Without `dev`, a seeded tenth of `train` is held out (`hold_out`).

    Args:
        train: the training file (CSV, TSV or JSON Lines).
        dev: the validation file, or None.
        test: the test file, or None.
        name: the task's name.
        num_classes: read labels as class ids below this number (`read_table`'s way).
        seed: the seed of the held-out tenth.
        **columns: `read_table`'s text_column, text_pair_column, label_column, label_names,
            regression and format.

    Returns:
        A `TaskData` with "train", "dev" and, given `test`, "test".

    Examples:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.csv"
        >>> _ = path.write_text("review,sentiment\\n" + "a joy,pos\\nso dull,neg\\n" * 5)
        >>> task = table_task(path, text_column="review", label_column="sentiment")
        >>> task.kind, task.label_names, len(task.splits["train"]), len(task.splits["dev"])
        ('classification', ('neg', 'pos'), 9, 1)
        >>> task.splits["train"][0]
        ('a joy', 1)
    """
    if columns.get("label_names") is not None or columns.get("regression") or num_classes:
        splits = {"train": read_table(train, **columns)}
        kind = "regression" if columns.get("regression") else "classification"
        names = columns.get("label_names")
        read = lambda path: read_table(path, **columns)  # noqa: E731
    else:
        splits, kind, names, read = _inferred(train, **columns)
    if dev is not None:
        splits["dev"] = read(dev)
    else:
        splits["train"], splits["dev"] = hold_out(splits["train"], seed)
    if test:
        splits["test"] = read(test)
    description = f"{train}, {dev if dev is not None else 'a held-out tenth'}"
    if kind == "regression":
        return TaskData(name, "regression", 1, splits, description=description)
    if num_classes is None:
        num_classes = (len(names) if names is not None else
                       1 + max(label for split in splits.values() for _, label in split))
    return TaskData(name, "classification", max(num_classes, 2), splits,
                    tuple(names) if names else None, description)


def _inferred(train, text_column="text", text_pair_column=None, label_column="label",
              format=None):
    """({"train": examples}, kind, label names, a reader of the other files) with the labels
    the training file holds (`label_kind`)."""
    rows = _text_rows(train, text_column, text_pair_column, label_column, format)
    kind, names = label_kind(os.fspath(train), [(line, y) for line, _, y in rows], label_column)

    def label(path, line, value):
        if kind == "regression":
            return parse_label(path, line, value, None, True, label_column)
        return label_id(path, line, value, names, label_column)

    def read(path):
        path = os.fspath(path)
        return [(texts, label(path, line, value)) for line, texts, value in
                _text_rows(path, text_column, text_pair_column, label_column, format)]

    train_examples = [(texts, label(os.fspath(train), line, value))
                      for line, texts, value in rows]
    return {"train": train_examples}, kind, names, read
