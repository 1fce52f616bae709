"""Multiple-choice questions of one's own: JSON Lines with a question, its choices and the
answer."""

import os

from kbert.data.tasks.common import DataError, TaskData, check_text, fail, hold_out, jsonl_records
from kbert.text.utf8 import utf8_lines

CHOICES_COLUMN = "choices"
"""The field that makes a JSON Lines file a multiple-choice one: the list of choices."""


def read_choices(path, question_column="question", answer_column="answer"):
    """Multiple-choice examples `((question, (choice, ...)), index of the right choice)` from
    a JSON Lines file whose records hold the question, a list of choices (`choices`) and the
    answer: the index of the right choice (from 0) or its text.

    Args:
        path: the JSON Lines file.
        question_column: the field holding the question.
        answer_column: the field holding the answer.

    Returns:
        A list of examples, every one with as many choices as the first.

    Examples:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "quiz.jsonl"
        >>> _ = path.write_text('{"question": "2 + 2?", "choices": ["3", "4"], "answer": 1}\\n'
        ...                     '{"question": "Sky?", "choices": ["blue", "red"], "answer": "blue"}\\n')
        >>> read_choices(path)
        [(('2 + 2?', ('3', '4')), 1), (('Sky?', ('blue', 'red')), 0)]
    """
    path = os.fspath(path)
    examples = []
    for line, record in jsonl_records(path, utf8_lines(path)):
        question = check_text(path, line, record.get(question_column), question_column)
        choices = record.get(CHOICES_COLUMN)
        if not isinstance(choices, list) or len(choices) < 2:
            fail(path, line, f"column {CHOICES_COLUMN!r} must hold a list of at least two "
                             f"choices, got {choices!r}.")
        choices = tuple(check_text(path, line, c, CHOICES_COLUMN) for c in choices)
        if examples and len(choices) != len(examples[0][0][1]):
            fail(path, line, f"{len(choices)} choices, where the first question has "
                             f"{len(examples[0][0][1])}: every question needs as many.")
        examples.append(((question, choices), _answer(path, line, record.get(answer_column),
                                                      choices, answer_column)))
    if not examples:
        raise DataError(f"{path}: no examples.")
    return examples


def _answer(path, line, value, choices, column):
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(choices):
        return value
    if isinstance(value, str) and value in choices:
        return choices.index(value)
    fail(path, line, f"answer {value!r} in column {column!r} is neither the index (from 0) "
                     f"nor the text of one of its {len(choices)} choices.")


def choice_task(train, dev=None, test=None, name="multiple_choice", seed=0, **columns):
    """A multiple-choice `TaskData` from JSON Lines files read with `read_choices` (the same
    `columns` for each); without `dev`, a seeded tenth of `train` is held out (`hold_out`)."""
    splits = {"train": read_choices(train, **columns)}
    count = len(splits["train"][0][0][1])
    for split, path in (("dev", dev), ("test", test)):
        if path is not None:
            splits[split] = read_choices(path, **columns)
            if len(splits[split][0][0][1]) != count:
                raise DataError(f"{path}: {len(splits[split][0][0][1])} choices a question; "
                                f"the training file {train} has {count}.")
    if dev is None:
        splits["train"], splits["dev"] = hold_out(splits["train"], seed)
    return TaskData(name, "multiple_choice", count, splits,
                    description=f"{train}, {dev if dev is not None else 'a held-out tenth'}")
