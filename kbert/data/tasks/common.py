"""The shared pieces of every task reader: `TaskData`, `DataError` and row checks."""

import dataclasses
import json
import math
import random
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


def hold_out(examples, seed, fraction=0.1, key=None):
    """(train, held out): a seeded `fraction` of `examples` (at least one, never all) held out,
    both in file order. `key(example)` groups examples that must stay together (the questions
    of one SQuAD paragraph); by default each example is its own group.

    Args:
        examples: a list of examples.
        seed: the seed that draws the held-out groups.
        fraction: the share of the groups held out.
        key: a function of an example giving its group, or None.

    Returns:
        Two lists that together hold `examples`.

    Examples:
        >>> train, dev = hold_out(list(range(20)), seed=0)
        >>> len(train), len(dev), sorted(train + dev) == list(range(20))
        (18, 2, True)
    """
    keys = [n if key is None else key(e) for n, e in enumerate(examples)]
    groups = list(dict.fromkeys(keys))
    if len(groups) < 2:
        raise DataError(f"{len(examples)} example(s) in one group cannot be split into train "
                        "and a held-out tenth: give a validation file.")
    count = min(len(groups) - 1, max(1, math.ceil(fraction * len(groups))))
    held = set(random.Random(seed).sample(groups, count))
    return ([e for e, k in zip(examples, keys) if k not in held],
            [e for e, k in zip(examples, keys) if k in held])


def label_kind(path, labels, column):
    """What the raw labels of a training file make: ("classification", sorted label names) or
    ("regression", None) when some label is a number that is not an integer. Integers sort as
    numbers, other names as text; a file mixing numbers and words is refused, naming the line.

    Args:
        path: the file, for messages.
        labels: (line, raw label) pairs: strings (CSV, TSV) or JSON values (JSON Lines).
        column: the label column's name, for messages.

    Returns:
        (kind, label names or None).

    Examples:
        >>> label_kind("f.csv", [(2, "pos"), (3, "neg"), (4, "pos")], "label")
        ('classification', ('neg', 'pos'))
        >>> label_kind("f.csv", [(2, "10"), (3, "9")], "label")
        ('classification', ('9', '10'))
        >>> label_kind("f.jsonl", [(1, 0.5), (2, 3)], "label")
        ('regression', None)
    """
    kinds = {}
    for line, value in labels:
        _check_present(path, line, value, column)
        number = _number(value)
        kind = "word" if number is None else "number"
        if kinds and kind not in kinds:
            (other, (first, first_value)), = kinds.items()
            fail(path, line, f"label {value!r} in column {column!r} is a {kind}, but line "
                             f"{first}'s label {first_value!r} is a {other}: a file's labels "
                             "are all names or all numbers.")
        kinds.setdefault(kind, (line, value))
    if "number" in kinds:
        numbers = [_number(v) for _, v in labels]
        if any(not float(n).is_integer() for n in numbers):
            return "regression", None
        return "classification", tuple(str(int(n)) for n in sorted(set(numbers)))
    return "classification", tuple(sorted({str(v).strip() for _, v in labels}))


def label_id(path, line, value, label_names, column):
    """The id of a raw label among `label_names` (as `label_kind` names them: an integer
    spelled 1, 1.0 or 01 is "1"); an unknown label is refused, naming the line."""
    _check_present(path, line, value, column)
    number = _number(value)
    key = str(value).strip() if number is None or not float(number).is_integer() \
        else str(int(number))
    if key not in label_names:
        fail(path, line, f"label {key!r} in column {column!r} is not one of the training "
                         f"file's labels {list(label_names)}.")
    return label_names.index(key)


def _check_present(path, line, value, column):
    """Refuses a missing or blank label, naming its line."""
    if value is None or (isinstance(value, str) and not value.strip()):
        fail(path, line, f"missing label in column {column!r}.")


def _number(value):
    """A label's value as a number (int or float), or None for a name."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def check_text(path, line, value, column):
    if value is None:
        fail(path, line, f"missing column {column!r}.")
    if not isinstance(value, str):
        fail(path, line, f"column {column!r} is not text: {value!r}.")
    if not value.strip():
        fail(path, line, f"empty text in column {column!r}.")
    return value


def parse_label(path, line, value, label_names, regression, column):
    _check_present(path, line, value, column)
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
