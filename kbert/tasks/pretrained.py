"""A task model with its task spec, from a run or a fine-tuned checkpoint directory
(`open_task_model`: what `kbert evaluate`, `predict` and `export` read), and a fine-tuned head
to start from (`start_from_fine_tuned_head`)."""

import pathlib
import warnings

from kbert import models, presets
from kbert.convert.huggingface import hf_label_names
from kbert.convert.task_heads import checkpoint_head
from kbert.models.pretrained import fine_tuned_head
from kbert.runs import INFO_FILE, MODEL_FILE, RunDirectory, RunError
from kbert.tasks import get_spec, spec_of_model, spec_of_run, with_null_threshold, with_top_k
from kbert.tasks.fill_mask import open_masked_lm
from kbert.tasks.spec import head_in_task_order

TASK_CLASSES = (models.BertClassifier, models.BertTokenClassifier, models.BertMultipleChoice,
                models.BertSpanLabeler)
"""The task classes whose fine-tuned heads checkpoints of other libraries hold."""

def start_from_fine_tuned_head(model, init, label_names=None, allow_pickle=False):
    """Fills the head of `model`, a task model just built on `init`'s encoder, from the head
    `init` holds for the same task, as transformers' `from_pretrained` goes on from a
    fine-tuned model (a sentiment classifier trained further, a SQuAD model on new questions).
    Its outputs follow the task's `label_names` where the checkpoint names the same labels in
    another order (`label_order`); other names keep their ids, with a warning. Returns whether
    a head was taken: not when `init` holds none for this task, or one of another size (a new
    head trains, with a warning). `allow_pickle`: the head may come from a pytorch_model.bin."""
    head = fine_tuned_head(type(model), init, allow_pickle)
    if head is None:
        return False
    layer = model.get_layer(head.layer)
    kernel, bias = head.weights
    if layer.kernel.shape != kernel.shape:
        warnings.warn(f"{init} holds a {type(model).__name__} head of {kernel.shape[-1]} "
                      f"outputs, not this task's {layer.kernel.shape[-1]}: a new head trains.",
                      stacklevel=2)
        return False
    names = head.kwargs.get("label_names") or hf_label_names(presets.resolve_preset(init).directory)
    if names and label_names:
        kernel, bias = head_in_task_order(kernel, bias, names, label_names, str(init))
    layer.set_weights([kernel, bias])
    return True


def fine_tuned_model(path, allow_pickle=False):
    """The task model, head included, of a checkpoint directory that holds a fine-tuned head
    (transformers' task classes, keras-hub's BertTextClassifier, Google's run_classifier.py /
    run_squad.py: `kbert.convert.task_heads.checkpoint_head`); None for anything else (an
    encoder checkpoint, a run directory, a file)."""
    if not pathlib.Path(path).is_dir() or RunDirectory.is_run(path):
        return None
    found = checkpoint_head(path)
    cls = next((c for c in TASK_CLASSES if c.checkpoint_heads.holds(found)), None)
    return None if cls is None else cls.from_pretrained(str(path), allow_pickle=allow_pickle)


def open_model(path, allow_pickle=False):
    """(model, run.json, label names) of a run directory; (model, None, its label names) of a
    checkpoint directory holding a fine-tuned head (`fine_tuned_model`), or a masked-LM head
    (a `BertPretrainer`, `open_masked_lm`)."""
    model = fine_tuned_model(path, allow_pickle)
    if model is not None:
        return model, None, hf_label_names(path)
    model = open_masked_lm(path, allow_pickle)
    if model is not None:
        return model, None, None
    try:
        run = RunDirectory.open(path)
    except RunError as error:
        raise RunError(f"{str(error).removesuffix('.')}, or a checkpoint directory with a "
                       "fine-tuned or masked-LM head (transformers, Google, keras-hub)."
                       ) from None
    info = run.info  # first: a broken run.json is named before the model is read
    return run.load_model(), info, info.get("label_names")


def open_task_model(path, task=None, data_dir=None, allow_pickle=False, null_threshold=None,
                    with_data=False, top_k=None):
    """(task spec, model) for answering raw input with a fine-tuned run or a checkpoint
    directory holding a fine-tuned head. Without `task`, a run answers as it was trained
    (`spec_of_run`) and a checkpoint as its head says (`spec_of_model`: SQuAD v1.1 for spans);
    with one, as that task (its spec fitted to the model: "squad2" lets a checkpoint's span
    model answer nothing, "sentiment" gives its labels). `with_data`: a spec that reads the
    task's data, for scoring (a run's from the data directory and options it was trained
    with; a checkpoint then needs `task`). `null_threshold` replaces a SQuAD v2.0 run's
    (`with_null_threshold`); `top_k`, the pieces a masked LM gives per blank (`with_top_k`)."""
    model, info, label_names = open_model(path, allow_pickle)
    if with_data and info is None and hasattr(model, "mlm_head"):
        raise ValueError(f"{path} is a pre-trained masked LM, not a fine-tuned model: no task "
                         "scores it (kbert pretrain reports its held-out masked-LM accuracy). "
                         "Fine-tune it first: kbert finetune --init ...")
    if task is None and info is None and with_data:
        raise ValueError(f"{path} is a fine-tuned checkpoint, not a kbert run, so it names no "
                         "task to score it on: give one, e.g. task=squad.")
    if task is None and not with_data:
        spec = spec_of_run(info) if info is not None else spec_of_model(model, label_names)
    else:
        spec = get_spec(task, data_dir) if task is not None else get_spec(
            info["task"], data_dir or info.get("data_dir"), **info.get("task_options", {}))
    if task is None and info is not None:  # the run's own task, from its run.json
        _check_run_model(spec, model, label_names, path)
    elif task is not None:  # a checkpoint's spec is read off its model: it fits
        spec.fit_to(model, label_names)
    return with_top_k(with_null_threshold(spec, null_threshold), top_k), model


def _check_run_model(spec, model, label_names, path):
    """A run's model.keras must be of the task its run.json names (a model copied in from
    another run answered with a traceback, or was exported under the other run's labels)."""
    try:
        spec.fit_to(model, label_names)
    except ValueError as error:
        raise RunError(f"{path}: its {MODEL_FILE} does not fit its {INFO_FILE} "
                       f"({str(error).rstrip('.')}); were they written by different runs?"
                       ) from None
