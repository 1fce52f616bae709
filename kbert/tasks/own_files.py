"""One's own data files as a task spec for the one driver: the spec of the task their format
makes (`kbert.data.own_files.file_kind`), or the one named, reading them with the built-in
tasks' readers (`table_task`, `choice_task`, `conll_files`, `squad_files`)."""

import os

from kbert.data.own_files import FILE_TASKS, DataFiles, file_kind
from kbert.data.tasks.tables import pair_column

HOLD_OUT_SEED = 0
"""The seed of the tenth of a training file held out when no validation file is given."""


def file_spec(files, task=None, seed=HOLD_OUT_SEED, **options):
    """The task spec of one's own `files`, its data read and checked.

    Args:
        files: a `DataFiles`.
        task: one of `FILE_TASKS`, or None: the training file's format decides.
        seed: the seed of the held-out tenth, without a validation file.
        **options: the task's own options (SQuAD's `doc_stride`, CoNLL's `batching`, ...).

    Returns:
        A `kbert.tasks.TaskSpec` whose run.json keeps the files and columns, so that `kbert
        evaluate` reads them again and `kbert predict` answers with the data's label names.

    Examples:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "reviews.csv"
        >>> _ = path.write_text("review,stars\\n" + "a joy,5\\nso dull,1\\nfine,3\\n" * 4)
        >>> spec = file_spec(DataFiles(str(path), text_column="review", label_column="stars"))
        >>> spec.name, spec.kind, spec.task.label_names
        ('sentence', 'classification', ('1', '3', '5'))
    """
    if task is not None and task not in FILE_TASKS:
        raise ValueError(f"Task {task!r} does not read one's own files (train_file); those "
                         f"tasks are {', '.join(FILE_TASKS)}.")
    paths = files.paths
    kind = task or file_kind(paths["train"])
    if kind == "squad" and task is None:
        from kbert.data.squad import read_squad

        kind = "squad2" if read_squad(paths["train"])[1] == "2.0" else "squad"
    columns = {"text_column": files.text_column, "text_pair_column": files.text_pair_column,
               "label_column": files.label_column}
    if kind in ("squad", "squad2", "conll"):
        given = sorted(name for name, value in columns.items() if value is not None)
        if given:
            raise ValueError(f"{', '.join(given)} name(s) the columns of a table; a {kind} file "
                             "has none.")
        columns = {}
    spec = own_task(kind, paths, seed=seed, **columns, **options)
    spec.splits()  # read now: a bad file is named before any output is written
    return spec


def own_task(name, files, seed=HOLD_OUT_SEED, text_column=None, text_pair_column=None,
             label_column=None, **options):
    """The spec of task `name` (one of `FILE_TASKS`) on `files` ({"train", "dev", "test"} →
    a path or None), as `file_spec` makes it and `kbert.tasks.get_spec` remakes it from a
    run's run.json; `options` go to a SQuAD or CoNLL spec."""
    from kbert.tasks.sentence import SentenceTask

    if not isinstance(files, dict) or not files.get("train"):
        raise ValueError(f"Task {name!r} reads one's own files: give train_file.")
    train, dev, test = (files.get(split) for split in ("train", "dev", "test"))
    own = {"train": train, "dev": dev, "test": test}
    if name == "conll":
        from kbert.tasks.conll import ConllTask

        return ConllTask(files=own, seed=seed, **options)
    if name in ("squad", "squad2"):
        from kbert.tasks.squad import SquadTask

        return SquadTask("2.0" if name == "squad2" else "1.1", files=own, seed=seed,
                         **options)
    if options:
        raise ValueError(f"Task {name!r} takes no option "
                         f"{', '.join(f'{k}={v!r}' for k, v in sorted(options.items()))}.")
    if name == "multiple_choice":
        from kbert.data.tasks import choice_task

        data = choice_task(train, dev, test, seed=seed,
                           question_column=text_column or "question",
                           answer_column=label_column or "answer")
    elif name == "sentence":
        from kbert.data.tasks import table_task

        text_pair_column = pair_column(train, text_pair_column)
        data = table_task(train, dev, test, name="sentence", seed=seed,
                          text_column=text_column or "text", text_pair_column=text_pair_column,
                          label_column=label_column or "label")
    else:
        raise ValueError(f"Task {name!r} does not read one's own files; those tasks are "
                         f"{', '.join(FILE_TASKS)}.")
    options = {"files": own, "seed": seed,
               "text_column": text_column, "text_pair_column": text_pair_column,
               "label_column": label_column}
    return SentenceTask(data, cli_name=name, options=options)


def held_out_note(files):
    """The line that says a tenth of the training file is held out (None with a validation
    file)."""
    if files.validation_file is not None:
        return None
    return (f"No validation file: a seeded tenth of {os.path.basename(files.train_file)} is "
            "held out to score on.")
