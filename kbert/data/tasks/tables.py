"""CSV, TSV and JSONL files with named text / text-pair / label columns."""

import csv
import io
import os
import pathlib

from kbert.data.tasks.common import (DataError, TaskData, check_text, fail, jsonl_records,
                                     parse_label)
from kbert.text.utf8 import read_utf8, utf8_lines


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
        texts = tuple(check_text(path, line, get(c), c) for c in columns)
        label = parse_label(path, line, get(label_column), label_names, regression,
                             label_column)
        return (texts[0] if len(texts) == 1 else texts, label)

    examples = []
    if format == "jsonl":
        for line, record in jsonl_records(path, utf8_lines(path)):
            examples.append(example(line, record.get))
    else:
        with io.StringIO(read_utf8(path), newline="") as f:
            reader = csv.DictReader(f, delimiter="," if format == "csv" else "\t")
            if reader.fieldnames is None:
                raise DataError(f"{path}: empty file.")
            missing = [c for c in columns + [label_column] if c not in reader.fieldnames]
            if missing:
                fail(path, 1, f"header lacks the columns {missing}; header is "
                               f"{reader.fieldnames}.")
            start = reader.line_num + 1
            for record in reader:
                line = start
                start = reader.line_num + 1
                if None in record:
                    fail(path, line, f"more fields than the header's {len(reader.fieldnames)}.")
                examples.append(example(line, record.get))
    if not examples:
        raise DataError(f"{path}: no examples.")
    return examples


def table_task(train, dev, test=None, name="custom", num_classes=None, **columns):
    """A `TaskData` from user files read with `read_table` (same `columns` arguments for each)."""
    splits = {"train": read_table(train, **columns), "dev": read_table(dev, **columns)}
    if test:
        splits["test"] = read_table(test, **columns)
    if columns.get("regression"):
        return TaskData(name, "regression", 1, splits, description=f"{train}, {dev}")
    names = columns.get("label_names")
    if num_classes is None:
        num_classes = (len(names) if names is not None else
                       1 + max(label for split in splits.values() for _, label in split))
    return TaskData(name, "classification", max(num_classes, 2), splits,
                    tuple(names) if names else None, f"{train}, {dev}")
