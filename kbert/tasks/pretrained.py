"""`BertTask.from_pretrained`: a task model in one call, from a run directory or a preset."""

from kbert.config import pop_rates
from kbert.runs import RunDirectory

# The preprocessor each task class packs its raw inputs with, and its default length.
_PREPROCESSORS = {
    "BertClassifier": ("kbert.text.preprocessor", "BertPreprocessor", 128),
    "BertMultipleChoice": ("kbert.text.preprocessor", "BertPreprocessor", 128),
    "BertFeatureClassifier": ("kbert.text.preprocessor", "BertPreprocessor", 128),
    "BertSpanLabeler": ("kbert.text.span_preprocessor", "BertSpanPreprocessor", 384),
    "BertTokenClassifier": ("kbert.text.token_preprocessor", "BertTokenPreprocessor", 128),
    "BertPretrainer": ("kbert.text.masked_lm_preprocessor", "BertMaskedLMPreprocessor", 128),
}


def preprocessor_for(cls, tokenizer, sequence_length=None):
    """The preprocessor `cls` takes raw text with, on `tokenizer`."""
    import importlib

    for klass in cls.__mro__:
        if klass.__name__ in _PREPROCESSORS:
            module, name, default = _PREPROCESSORS[klass.__name__]
            pre_cls = getattr(importlib.import_module(module), name)
            return pre_cls(tokenizer, sequence_length=sequence_length or default)
    raise TypeError(f"No raw-text preprocessor is known for {cls.__name__}.")


def task_from_pretrained(cls, name_or_dir, sequence_length=None, **kwargs):
    """A run directory → its saved model (which must be a `cls`); any other name (weights or
    size preset, checkpoint directory, random:<name>) → pretrained backbone, tokenizer, the
    preprocessor `cls` takes and a new head built with `kwargs` (the encoder's dropout rates,
    `hidden_dropout` and `attention_dropout`, go to the backbone)."""
    from kbert.presets import load_backbone_and_tokenizer

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
    backbone, tokenizer = load_backbone_and_tokenizer(name_or_dir, dtype=dtype,
                                                      **pop_rates(kwargs))
    return cls(backbone, preprocessor=preprocessor_for(cls, tokenizer, sequence_length),
               **kwargs)
