"""Fine-tuning tasks as specs for the one driver (`kbert.training.finetune`).

`get_spec(name, data_dir)` knows every task `kbert finetune --task NAME` takes: the sentence,
pair and multiple-choice tasks of `kbert.data.tasks`, SQuAD v1.1 / v2.0 and CoNLL-2003 NER,
and one's own files (`kbert.tasks.own_files`: "sentence" and "multiple_choice" with their
`files`, SQuAD and CoNLL with theirs).
"""

from kbert import models
from kbert.tasks.spec import EVAL_SEED, TaskSpec, subset


def get_spec(name, data_dir=None, **options) -> TaskSpec:
    """The spec for task `name` (or a `kbert.data.tasks.TaskData`, or one's own files as a
    `kbert.data.own_files.DataFiles`, or a spec, passed through)."""
    from kbert.data.own_files import DataFiles
    from kbert.data.tasks import TASKS, TaskData, load_task
    from kbert.tasks.sentence import SentenceTask

    if isinstance(name, TaskSpec):
        return name
    if isinstance(name, DataFiles):
        from kbert.tasks.own_files import file_spec

        return file_spec(name, **options)
    if isinstance(name, TaskData):
        return SentenceTask(name)
    if name in ("sentence", "multiple_choice"):
        from kbert.tasks.own_files import own_task

        return own_task(name, **options)
    lazy = _lazy_specs().get(name)
    if lazy is not None:
        _check_options(lazy, name, options)
        return lazy(data_dir=data_dir, **options)
    if name not in TASKS and not str(name).startswith("glue:"):
        raise ValueError(f"Unknown task {name!r}; known: "
                         f"{', '.join([*TASKS, *_lazy_specs()])}, glue:<TASK>.")
    if options:
        raise ValueError(f"Task {name!r} takes no options; got {_as_set(options)}.")
    return SentenceTask(load_task(name, data_dir), cli_name=name, data_dir=data_dir)


def spec_of_run(info) -> TaskSpec:
    """The spec of a run directory's run.json, for answering raw input: built from what the
    run recorded (labels, pair-ness, options), so `kbert predict` reads no task data."""
    from kbert.tasks.sentence import SentenceTask

    if info["task"] in _lazy_specs():
        return get_spec(info["task"], info.get("data_dir"), **info.get("task_options", {}))
    return SentenceTask.from_run(info)


def spec_of_model(model, label_names=None) -> TaskSpec:
    """The spec that answers raw input with a task model fine-tuned outside kbert (a checkpoint
    holds its head, not its task's data): blanks filled for a masked LM (`BertPretrainer`),
    SQuAD for a span labeler (v1.1: always an answer), the model's tags for a token
    classifier, else a sentence task with `label_names` that takes single sentences or pairs
    (a checkpoint does not say which it was trained on)."""
    from kbert.data.tasks import TaskData
    from kbert.tasks.fill_mask import FillMaskTask
    from kbert.tasks.sentence import SentenceTask

    if isinstance(model, models.BertPretrainer):
        return FillMaskTask()
    if isinstance(model, models.BertSpanLabeler):
        return get_spec("squad")
    if isinstance(model, models.BertTokenClassifier):
        return get_spec("conll", label_names=model.label_names)
    if isinstance(model, models.BertMultipleChoice):
        return SentenceTask(TaskData("multiple_choice", "multiple_choice", model.num_choices, {}))
    regression = model.num_classes == 1
    return SentenceTask(TaskData("classifier", "regression" if regression else "classification",
                                 model.num_classes, {},
                                 label_names=tuple(label_names) if label_names else None))


def with_null_threshold(spec, null_threshold):
    """`spec` answering SQuAD v2.0 with this null threshold (None: as it is); refused for any
    other task, where the threshold would silently do nothing."""
    if null_threshold is None:
        return spec
    if getattr(spec, "version", None) != "2.0":
        raise ValueError(f"null_threshold is SQuAD v2.0's (task squad2); the model answers as "
                         f"{spec.name}, which has none.")
    spec.options["null_threshold"] = float(null_threshold)
    return spec


def with_top_k(spec, top_k):
    """`spec` giving `top_k` pieces per blank (None: as it is; `fill_mask` and the export
    check its range); refused for any task but a masked LM's, where it would silently do
    nothing."""
    if top_k is None:
        return spec
    if spec.kind != "fill_mask":
        raise ValueError(f"top_k is for a masked LM's blanks; the model answers as {spec.name}, "
                         "which has none.")
    spec.top_k = int(top_k)
    return spec


def _lazy_specs():
    """The tasks whose spec reads its data only when asked (so a run's spec needs none), by
    name: SQuAD v1.1 / v2.0 and CoNLL-2003."""
    from functools import partial

    from kbert.tasks.conll import ConllTask
    from kbert.tasks.squad import SquadTask

    return {"squad": partial(SquadTask, "1.1"), "squad2": partial(SquadTask, "2.0"),
            "conll": ConllTask}


def _check_options(spec_cls, name, options):
    import inspect

    known = set(inspect.signature(spec_cls).parameters) - {"version", "data_dir"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"Task {name!r} takes no option {_as_set(options, unknown)}; its "
                         f"options: {', '.join(sorted(known))}.")


def _as_set(options, names=None):
    """`name=value` for each option (the CLI shows `--name value`:
    `kbert_cli.messages.in_cli_terms`)."""
    return ", ".join(f"{k}={options[k]!r}" for k in sorted(names or options))


__all__ = ["EVAL_SEED", "TaskSpec", "get_spec", "spec_of_model", "spec_of_run", "subset"]
