"""Task names → loaders, as `kbert finetune --task NAME` knows them."""

from kbert.data.tasks.glue import read_glue_dir
from kbert.data.tasks.sentiment import sentiment_task
from kbert.data.tasks.mmlu import mmlu_task
from kbert.data.tasks.qnli import qnli_task


TASKS = {
    "sentiment": lambda data_dir=None: sentiment_task(data_dir),
    "sentiment_score": lambda data_dir=None: sentiment_task(data_dir, regression=True),
    "mmlu": lambda data_dir=None: mmlu_task(data_dir),
    "qnli": lambda data_dir=None: qnli_task(data_dir),
    "glue": lambda data_dir=None: read_glue_dir(_required(data_dir, "glue")),
}


def _required(data_dir, task):
    if data_dir is None:
        raise ValueError(f"Task {task!r} needs data_dir (a GLUE task directory of TSV files).")
    return data_dir


def load_task(name, data_dir=None):
    """The `TaskData` called `name`: "sentiment", "sentiment_score", "mmlu", "qnli" (real data,
    fetched when `data_dir` is None), "glue" (a GLUE task directory in `data_dir`) or
    "glue:<TASK>" (e.g. "glue:sst-2", the layout named explicitly)."""
    if name.startswith("glue:"):
        return read_glue_dir(_required(data_dir, name), task=name.split(":", 1)[1])
    if name not in TASKS:
        raise ValueError(f"Unknown task {name!r}; known: {', '.join(TASKS)}, glue:<TASK>.")
    return TASKS[name](data_dir)
