"""Task models in one call: `BertTask.from_pretrained` from a run directory or a preset, and
the model with its task spec from a run or a fine-tuned checkpoint directory (`open_task_model`:
what `kbert evaluate`, `predict` and `export` read)."""

import warnings

from kbert.config import pop_rates
from kbert.runs import INFO_FILE, MODEL_FILE, RunDirectory, RunError

# The preprocessor each task class packs its raw inputs with, its default length, and whether
# that default is cut to a smaller model's positions (a longer row would embed no position).
_PREPROCESSORS = {
    "BertClassifier": ("kbert.text.preprocessor", "BertPreprocessor", 128, True),
    "BertMultipleChoice": ("kbert.text.preprocessor", "BertPreprocessor", 128, True),
    "BertFeatureClassifier": ("kbert.text.preprocessor", "BertPreprocessor", 128, True),
    "BertFeatureExtractor": ("kbert.text.preprocessor", "BertPreprocessor", 128, True),
    "BertSpanLabeler": ("kbert.text.span_preprocessor", "BertSpanPreprocessor", 384, True),
    "BertTokenClassifier": ("kbert.text.token_preprocessor", "BertTokenPreprocessor", 128, True),
    "BertPretrainer": ("kbert.text.masked_lm_preprocessor", "BertMaskedLMPreprocessor", 128,
                       True),
}


def preprocessor_for(cls, tokenizer, sequence_length=None, max_positions=None):
    """The preprocessor `cls` takes raw text with, on `tokenizer`; without a
    `sequence_length`, the task's default, cut to the model's `max_positions` where it may be."""
    import importlib

    for klass in cls.__mro__:
        if klass.__name__ in _PREPROCESSORS:
            module, name, default, cut = _PREPROCESSORS[klass.__name__]
            pre_cls = getattr(importlib.import_module(module), name)
            length = sequence_length or min(default, (cut and max_positions) or default)
            return pre_cls(tokenizer, sequence_length=length)
    raise TypeError(f"No raw-text preprocessor is known for {cls.__name__}.")


def task_from_pretrained(cls, name_or_dir, sequence_length=None, **kwargs):
    """A run directory → its saved model (which must be a `cls`); any other name (weights or
    size preset, checkpoint directory, random:<name>) → pretrained backbone, tokenizer, the
    preprocessor `cls` takes (unless `kwargs` name one, or None) and a new head built with
    `kwargs` (the encoder's dropout rates, `hidden_dropout` and `attention_dropout`, go to the
    backbone)."""
    from kbert.presets import load_backbone_and_tokenizer, load_pretraining_heads

    if RunDirectory.is_run(name_or_dir):
        if kwargs or sequence_length:
            raise ValueError(f"{name_or_dir} is a trained run: it is loaded as saved, so "
                             f"{sorted(kwargs) + (['sequence_length'] if sequence_length else [])} "
                             "cannot apply.")
        model = RunDirectory.open(name_or_dir).load_model()
        if not isinstance(model, cls):
            raise TypeError(f"{name_or_dir} holds a {type(model).__name__}, not a "
                            f"{cls.__name__}.")
        return model
    dtype = kwargs.pop("dtype", None)
    allow_pickle = kwargs.pop("allow_pickle", False)  # a pytorch_model.bin: trusted files only
    backbone, tokenizer = load_backbone_and_tokenizer(name_or_dir, dtype=dtype,
                                                      allow_pickle=allow_pickle,
                                                      **pop_rates(kwargs))
    head = _fine_tuned_head(cls, name_or_dir, allow_pickle)
    if head is not None:
        for key, value in head.kwargs.items():
            if kwargs.setdefault(key, value) != value:
                raise ValueError(f"{name_or_dir} holds a fine-tuned {cls.__name__} head with "
                                 f"{key}={value!r}, not {kwargs[key]!r}. For a new head, build "
                                 f"{cls.__name__}(BertBackbone.from_pretrained(...), ...).")
        sequence_length = sequence_length or head.sequence_length
    if "preprocessor" in kwargs:  # keras-hub's `preprocessor=None`: packed ids in
        if sequence_length is not None:
            raise ValueError("sequence_length sizes the preprocessor from_pretrained makes; "
                             "with preprocessor= given, set it on that one.")
    else:
        kwargs["preprocessor"] = preprocessor_for(cls, tokenizer, sequence_length,
                                                  backbone.config.max_position_embeddings)
    model = cls(backbone, **kwargs)
    if head is not None:
        model.get_layer(head.layer).set_weights(head.weights)
    elif hasattr(model, "mlm_head"):  # a BertPretrainer goes on from the checkpoint's heads
        _warn_of_fresh_heads(model, name_or_dir,
                             load_pretraining_heads(model, name_or_dir, allow_pickle=allow_pickle))
    return model


def _warn_of_fresh_heads(pretrainer, name_or_dir, loaded):
    """Warns where a pretrained checkpoint lacked a head the pre-trainer has, as transformers'
    `from_pretrained` does: a fresh masked-LM head fills blanks with noise until pre-trained."""
    from kbert.presets import resolve_preset

    if not resolve_preset(name_or_dir).load_weights:
        return  # random weights throughout
    fresh = [name for name, head in (("masked LM", pretrainer.mlm_head),
                                     ("next sentence", pretrainer.nsp_head))
             if head is not None and name not in loaded]
    if fresh:
        warnings.warn(f"{name_or_dir} holds no {' or '.join(fresh)} head: the pre-trainer's "
                      f"starts from random weights, so it predicts noise until pre-trained.",
                      stacklevel=4)


def _fine_tuned_head(cls, name_or_dir, allow_pickle=False):
    """The head a checkpoint of `cls`'s task holds (transformers' BertForSequenceClassification,
    keras-hub's BertTextClassifier or Google's run_classifier.py for a `BertClassifier`, ...),
    so that a model fine-tuned there answers here as it did; None for an encoder checkpoint, a
    preset or another task's checkpoint (a new head)."""
    from kbert.convert.task_heads import read_task_head
    from kbert.presets import resolve_preset

    preset = resolve_preset(name_or_dir)
    if preset.kind == "run" and preset.load_weights:
        return _run_head(cls, preset)
    if preset.kind != "checkpoint" or not preset.load_weights:
        return None
    return read_task_head(preset.directory, cls.__name__, allow_pickle=allow_pickle)


def _run_head(cls, preset):
    """The head of a run's model when that is a `cls` (a run trained further, or on a task of
    the same kind and size), with the run's label names; None for another class."""
    from kbert.convert.task_heads import HF_TASK_CLASSES, ReadHead

    trained = preset.run_model
    if type(trained) is not cls or cls.__name__ not in HF_TASK_CLASSES:
        return None
    layer = HF_TASK_CLASSES[cls.__name__][1]
    label_names = RunDirectory.open(preset.checkpoint).info.get("label_names")
    return ReadHead(layer, trained.get_layer(layer).get_weights(),
                    {"label_names": label_names} if label_names else {})


def start_from_fine_tuned_head(model, init, label_names=None, allow_pickle=False):
    """Fills the head of `model`, a task model just built on `init`'s encoder, from the head
    `init` holds for the same task, as transformers' `from_pretrained` goes on from a
    fine-tuned model (a sentiment classifier trained further, a SQuAD model on new questions).
    Its outputs follow the task's `label_names` where the checkpoint names the same labels in
    another order (`label_order`); other names keep their ids, with a warning. Returns whether
    a head was taken: not when `init` holds none for this task, or one of another size (a new
    head trains, with a warning). `allow_pickle`: the head may come from a pytorch_model.bin."""
    import warnings

    from kbert.convert.task_heads import hf_label_names
    from kbert.presets import resolve_preset
    from kbert.tasks.spec import head_in_task_order

    head = _fine_tuned_head(type(model), init, allow_pickle)
    if head is None:
        return False
    layer = model.get_layer(head.layer)
    kernel, bias = head.weights
    if layer.kernel.shape != kernel.shape:
        warnings.warn(f"{init} holds a {type(model).__name__} head of {kernel.shape[-1]} "
                      f"outputs, not this task's {layer.kernel.shape[-1]}: a new head trains.",
                      stacklevel=2)
        return False
    names = head.kwargs.get("label_names") or hf_label_names(resolve_preset(init).directory)
    if names and label_names:
        kernel, bias = head_in_task_order(kernel, bias, names, label_names, str(init))
    layer.set_weights([kernel, bias])
    return True


def fine_tuned_model(path, allow_pickle=False):
    """The task model, head included, of a checkpoint directory that holds a fine-tuned head
    (transformers' task classes, keras-hub's BertTextClassifier, Google's run_classifier.py /
    run_squad.py: `kbert.convert.task_heads.fine_tuned_kind`); None for anything else (an
    encoder checkpoint, a run directory, a file)."""
    import pathlib

    from kbert import models
    from kbert.convert.task_heads import fine_tuned_kind

    if not pathlib.Path(path).is_dir() or RunDirectory.is_run(path):
        return None
    kind = fine_tuned_kind(path)
    return None if kind is None else getattr(models, kind).from_pretrained(
        str(path), allow_pickle=allow_pickle)


def open_model(path, allow_pickle=False):
    """(model, run.json, label names) of a run directory; (model, None, its label names) of a
    checkpoint directory holding a fine-tuned head (`fine_tuned_model`), or a masked-LM head
    (a `BertPretrainer`, `open_masked_lm`)."""
    from kbert.convert.task_heads import hf_label_names
    from kbert.tasks.fill_mask import open_masked_lm

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
    from kbert.tasks import get_spec, spec_of_model, spec_of_run, with_null_threshold, with_top_k

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
