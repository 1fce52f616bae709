"""One's own data files (`DataFiles`) and the task kind their format makes (`file_kind`).

    CSV, TSV, JSON Lines          a sentence (or pair) task: classification, or regression
                                  when a label is a number that is not an integer
    JSON Lines with `choices`     multiple choice
    JSON with SQuAD's `data`      question answering (SQuAD v1.1, or v2.0)
    .conll, .txt, ... of columns  token tagging (a token first, its tag last, blank lines
                                  between sentences)
"""

import dataclasses
import json
import os
import pathlib

from kbert.data.tasks import DataError
from kbert.data.tasks.choices import CHOICES_COLUMN
from kbert.settings import setting
from kbert.text.utf8 import utf8_lines

FILE_TASKS = ("sentence", "multiple_choice", "squad", "squad2", "conll")
"""The tasks one's own files make: sentences (or pairs), multiple choice, SQuAD v1.1 / v2.0
and token tagging, as `--task` names them."""
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl")


@dataclasses.dataclass(frozen=True)
class DataFiles:
    """One's own data files, and the names of their columns.

    `kbert finetune` takes each as an option of the same name (`kbert.settings`).

    Args:
        train_file: fine-tune on this file of one's own: CSV, TSV or JSON Lines (sentences,
            pairs; multiple choice with a choices field), CoNLL-format tags or SQuAD-format
            JSON; its format decides the task.
        validation_file: score on this file while and after training (default: a seeded
            tenth of the training file, held out).
        test_file: score on this file at the end.
        text_column: the column of the text (default text; question for multiple choice).
        text_pair_column: the column of a pair's second text (default: text_pair, where the
            file has it).
        label_column: the column of the label (default label; answer for multiple choice):
            names or integers make a classification, other numbers a regression.
    """

    train_file: str = setting(None, metavar="FILE")
    validation_file: str = setting(None, metavar="FILE")
    test_file: str = setting(None, metavar="FILE")
    text_column: str = setting(None, metavar="NAME")
    text_pair_column: str = setting(None, metavar="NAME")
    label_column: str = setting(None, metavar="NAME")

    def __post_init__(self):
        if self.train_file is None and any(dataclasses.astuple(self)):
            given = [f.name for f in dataclasses.fields(self) if getattr(self, f.name)]
            raise ValueError(f"{', '.join(given)} describe one's own files: give train_file "
                             "too.")

    @property
    def paths(self):
        """{"train", "dev", "test"} → the file's absolute path, or None."""
        return {split: None if path is None else os.path.abspath(path) for split, path in
                (("train", self.train_file), ("dev", self.validation_file),
                 ("test", self.test_file))}


def file_kind(path):
    """The task `path`'s format makes (one of `FILE_TASKS`, SQuAD's as "squad"), read from its
    extension and its first record.

    Args:
        path: a data file.

    Returns:
        "sentence", "multiple_choice", "squad" or "conll".

    Examples:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "a.conll").write_text("-DOCSTART- O\\n\\nAnn B-PER\\n")
        >>> _ = (folder / "b.jsonl").write_text('{"question": "?", "choices": ["a", "b"]}\\n')
        >>> file_kind(folder / "a.conll"), file_kind(folder / "b.jsonl")
        ('conll', 'multiple_choice')
    """
    path = pathlib.Path(path)
    first = _first_line(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "sentence"
    if suffix in (".json", ".jsonl"):
        try:
            record = json.loads(first)
        except json.JSONDecodeError:  # one JSON document over many lines: SQuAD's layout
            return "squad" if suffix == ".json" else "sentence"  # the reader names the line
        if isinstance(record, dict) and isinstance(record.get("data"), list):
            return "squad"
        return "multiple_choice" if isinstance(record, dict) and CHOICES_COLUMN in record \
            else "sentence"
    if len(first.split()) >= 2:
        return "conll"
    raise DataError(f"{path}:1: cannot tell the task from a {suffix or 'nameless'} file whose "
                    "first line is not a token and its tag: name it with task (sentence, "
                    "multiple_choice, squad, squad2 or conll).")


def _first_line(path):
    """The file's first line that is not blank (nor a CoNLL -DOCSTART-)."""
    for line in utf8_lines(path):
        if line.strip() and not line.startswith("-DOCSTART-"):
            return line.strip()
    raise DataError(f"{path}: empty file.")
