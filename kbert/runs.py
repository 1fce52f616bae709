"""`RunDirectory`: what `kbert finetune` writes and what `evaluate`, `predict`, `export` and
`from_pretrained` read back, in one place.

    OUTPUT/
      model.keras      the task model with its preprocessor (vocabulary and casing inside)
      run.json         the task: name, kind, label names, and the settings it was trained with
                       (sequence length; for spans the windowing and decoding settings)
      metrics.json     the held-out metrics and timings of the run
      predictions.json what the run predicted on its held-out split, where the task has one
      logs/            TensorBoard
      eval_<split>/    what `kbert evaluate` scored the run on, when asked (metrics.json and
                       predictions.json); `eval_<task>_<split>/` for another task than the run's

A run directory is complete only once `run.json` is written, last, so a crash mid-save leaves
a directory that no reader takes for a finished run.
"""

import json
import os
import pathlib
import re
from typing import Self

from kbert.outputs import write_text

MODEL_FILE = "model.keras"
INFO_FILE = "run.json"
METRICS_FILE = "metrics.json"
PREDICTIONS_FILE = "predictions.json"
LOGS = "logs"


class RunError(ValueError):
    """A directory that is not a complete kbert run."""


def _write_json(path, value):
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _read_json(path):
    """The JSON object in `path`; `RunError` naming the file for anything else."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RunError(f"{path} is not valid JSON: {error}.") from None
    except RecursionError:
        raise RunError(f"{path} is nested too deeply to be a kbert run file.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise RunError(f"Cannot read {path}: {error}.") from None
    if not isinstance(value, dict):
        raise RunError(f"{path} does not hold a JSON object.")
    return value


INFO_KEYS = {"task": str, "kind": str, "settings": dict}
"""The keys every run.json holds, with their types; `task_options` and `data_dir`, when
present, are an object and a string."""
_OPTIONAL_INFO_KEYS = {"task_options": dict, "data_dir": str}
RUN_KINDS = ("classification", "regression", "multiple_choice", "span", "token_classification")
"""The `kind` of every task a run can be trained on (the task specs' `kind`)."""
TASK_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(:[A-Za-z0-9][\w.-]*)?")
"""A task name as run.json may hold it: a word of letters, digits, `_`, `.` and `-`, with one
`source:` before it (`sentiment`, `squad2`, `glue:SST-2`): never a path."""


def _check_info(info, path):
    for key, kind in INFO_KEYS.items():
        if key not in info:
            raise RunError(f"{path} lacks {key!r}.")
    for key, kind in {**INFO_KEYS, **_OPTIONAL_INFO_KEYS}.items():
        if info.get(key) is not None and not isinstance(info[key], kind):
            raise RunError(f"{path}: {key!r} must be a JSON "
                           f"{'object' if kind is dict else 'string'}, got {info[key]!r}.")
    if not TASK_NAME.fullmatch(info["task"]) or ".." in info["task"]:
        raise RunError(f"{path}: 'task' {info['task'][:80]!r} is no task name (letters, digits, "
                       "'_', '.', '-', as in 'sentiment' or 'glue:SST-2').")
    if info["kind"] not in RUN_KINDS:
        raise RunError(f"{path}: 'kind' {info['kind'][:80]!r} is none of "
                       f"{', '.join(RUN_KINDS)}.")
    return info


class RunDirectory:
    """A `kbert finetune` output directory (see the module docstring)."""

    def __init__(self, path):
        self.path = pathlib.Path(os.fspath(path))

    @classmethod
    def is_run(cls, path) -> bool:
        """Whether `path` is a run directory (False for what is no path: a `BertConfig`)."""
        if not isinstance(path, (str, os.PathLike)):
            return False
        path = pathlib.Path(os.fspath(path))
        return (path / INFO_FILE).is_file() and (path / MODEL_FILE).is_file()

    @classmethod
    def open(cls, path) -> Self:
        """The run at `path`; a clear error when it is not one."""
        run = cls(path)
        if not run.path.is_dir():
            raise FileNotFoundError(f"No run directory at {run.path}.")
        missing = [f for f in (MODEL_FILE, INFO_FILE) if not (run.path / f).is_file()]
        if missing:
            raise RunError(f"{run.path} holds no {' or '.join(missing)}: give a "
                           "`kbert finetune` output directory.")
        return run

    def eval_dir(self, split, task=None) -> pathlib.Path:
        """Where `kbert evaluate` writes a split's scores: `eval_<split>` for the run's own
        task, `eval_<task>_<split>` for another one, which must not replace them."""
        if task is None or task == self.info["task"]:
            return self.path / f"eval_{split}"
        name = re.sub(r"[^\w.-]+", "-", task)  # glue:SST-2 → glue-SST-2
        return self.path / f"eval_{name}_{split}"

    # --- writing ----------------------------------------------------------------------------

    def save(self, model, info, metrics, predictions=None):
        """Writes the model, metrics, predictions and, last, the task info."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / INFO_FILE).unlink(missing_ok=True)
        tmp = self.path / f".{MODEL_FILE}.tmp.keras"
        model.save(tmp)
        os.replace(tmp, self.path / MODEL_FILE)
        _write_json(self.path / METRICS_FILE, metrics)
        if predictions is not None:
            _write_json(self.path / PREDICTIONS_FILE, predictions)
        _write_json(self.path / INFO_FILE, info)

    # --- reading ----------------------------------------------------------------------------

    @property
    def info(self) -> dict:
        return _check_info(_read_json(self.path / INFO_FILE), self.path / INFO_FILE)

    @property
    def metrics(self) -> dict:
        path = self.path / METRICS_FILE
        return _read_json(path) if path.is_file() else {}

    def load_model(self, compile=False):
        """The saved task model with its preprocessor (`load_model_file`: Keras safe mode, a
        damaged file named). A model.keras that is a symbolic link is refused: a run holds its
        own model, and a link may point anywhere.

        Args:
          compile: restore the training configuration too.
        """
        from kbert.model_files import load_model_file

        path = self.path / MODEL_FILE
        if path.is_symlink():
            raise RunError(f"{path} is a symbolic link, refused: a run holds its own "
                           f"{MODEL_FILE} (copy the file in place of the link).")
        return load_model_file(path, compile=compile)
