"""Models from a name, in one call: what `BertTask.from_pretrained` builds.

A name is anything `kbert.presets` resolves: a weights or size preset, a checkpoint directory,
a `kbert finetune` run directory, or "random:<name>". A task class says what it is built from
on the class itself (`backbone_cls`, `preprocessor_cls`, `default_sequence_length`,
`checkpoint_heads`), and this module reads those attributes.
"""

import dataclasses
import warnings

from kbert import presets
from kbert.config_checks import pop_rates
from kbert.convert.task_heads import ReadHead, read_task_head
from kbert.models.backbone import BertBackbone
from kbert.runs import RunDirectory
from kbert.text.tokenizer import BertTokenizer


def load_backbone_and_tokenizer(name, dtype=None, vocabulary=None, allow_pickle=False,
                                backbone_cls=BertBackbone, **backbone_kwargs):
    """A backbone and its tokenizer for a name of `kbert.presets`.

    Args:
        name: a preset name, checkpoint directory, run directory, "random:<name>" or a
            `BertConfig`.
        dtype: the Keras dtype policy the backbone computes under.
        vocabulary: a vocab.txt path, a token list or a `BertTokenizer` that replaces the
            name's vocabulary, for random weights only: a size preset takes its `vocab_size`
            from it; any other name must already have that size.
        allow_pickle: whether a trusted `pytorch_model.bin` may be read.
        backbone_cls: the backbone class to build.
        **backbone_kwargs: constructor arguments of the backbone (e.g. `causal=True`).

    Returns:
        (backbone, tokenizer).

    Examples:
        >>> backbone, tokenizer = load_backbone_and_tokenizer("tiny")
        >>> backbone.config.num_layers, tokenizer.vocabulary_size()
        (2, 30522)
    """
    preset = presets.resolve_preset(name)
    if vocabulary is None:
        tokenizer = presets.load_tokenizer(preset, BertTokenizer)
    elif preset.load_weights:
        raise ValueError(f"{preset.name!r} is pretrained with its own vocabulary; a "
                         f"`vocabulary` goes with random weights only.")
    else:
        tokenizer = vocabulary if isinstance(vocabulary, BertTokenizer) else BertTokenizer(
            vocabulary=vocabulary, lowercase=True)
        size = tokenizer.vocabulary_size()
        if preset.kind == "size":
            preset = dataclasses.replace(preset, size=dataclasses.replace(
                preset.size, vocab_size=size))
        elif preset.config.vocab_size != size:
            raise ValueError(f"{preset.name!r} has vocab_size {preset.config.vocab_size}; the "
                             f"vocabulary has {size} tokens.")
    backbone = presets.load_backbone(preset, backbone_cls, dtype=dtype, allow_pickle=allow_pickle,
                                     **backbone_kwargs)
    if tokenizer.vocabulary_size() > backbone.config.vocab_size:
        raise ValueError(f"{preset.name!r}: the vocabulary has {tokenizer.vocabulary_size()} "
                         f"tokens, more than the model's vocab_size "
                         f"({backbone.config.vocab_size}).")
    return backbone, tokenizer


def preprocessor_for(cls, tokenizer, sequence_length=None, max_positions=None):
    """The preprocessor task class `cls` packs raw text with.

    Args:
        cls: a task model class.
        tokenizer: the `BertTokenizer` it reads with.
        sequence_length: the packed length; None for the class's `default_sequence_length`,
            cut to `max_positions` (a longer row would embed no position).
        max_positions: the model's `max_position_embeddings`.

    Returns:
        An instance of `cls.preprocessor_cls`.
    """
    if cls.preprocessor_cls is None:
        raise TypeError(f"No raw-text preprocessor is known for {cls.__name__}.")
    default = cls.default_sequence_length
    length = sequence_length or min(default, max_positions or default)
    return cls.preprocessor_cls(tokenizer, sequence_length=length)


def task_from_pretrained(cls, name_or_dir, sequence_length=None, **kwargs):
    """A task model of class `cls` from a name: `BertTask.from_pretrained`'s body.

    A run directory gives its saved model (which must be a `cls`). Any other name gives the
    pretrained backbone, tokenizer, the preprocessor `cls` takes (unless `kwargs` name one, or
    None) and a head: the checkpoint's own where it holds one of this task
    (`CheckpointHeads`), else a new one built with `kwargs`. The encoder's dropout rates in
    `kwargs` (`hidden_dropout`, `attention_dropout`) go to the backbone.
    """
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
    backbone, tokenizer = load_backbone_and_tokenizer(
        name_or_dir, dtype=dtype, allow_pickle=allow_pickle, backbone_cls=cls.backbone_cls,
        **pop_rates(kwargs))
    head = fine_tuned_head(cls, name_or_dir, allow_pickle)
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
        _warn_of_fresh_heads(model, name_or_dir, presets.load_pretraining_heads(
            model, name_or_dir, allow_pickle=allow_pickle))
    return model


def _warn_of_fresh_heads(pretrainer, name_or_dir, loaded):
    """Warns where a pretrained checkpoint lacked a head the pre-trainer has, as transformers'
    `from_pretrained` does: a fresh masked-LM head fills blanks with noise until pre-trained."""
    if not presets.resolve_preset(name_or_dir).load_weights:
        return  # random weights throughout
    fresh = [name for name, head in (("masked LM", pretrainer.mlm_head),
                                     ("next sentence", pretrainer.nsp_head))
             if head is not None and name not in loaded]
    if fresh:
        warnings.warn(f"{name_or_dir} holds no {' or '.join(fresh)} head: the pre-trainer's "
                      f"starts from random weights, so it predicts noise until pre-trained.",
                      stacklevel=4)


def fine_tuned_head(cls, name_or_dir, allow_pickle=False):
    """The head a checkpoint or run of `cls`'s task holds, so that a model fine-tuned there
    answers here as it did.

    Args:
        cls: a task model class.
        name_or_dir: a name of `kbert.presets`.
        allow_pickle: whether a trusted `pytorch_model.bin` may be read.

    Returns:
        A `ReadHead`, or None for an encoder checkpoint, a preset or another task's checkpoint
        (a new head).
    """
    preset = presets.resolve_preset(name_or_dir)
    if preset.kind == "run" and preset.load_weights:
        return _run_head(cls, preset)
    if preset.kind != "checkpoint" or not preset.load_weights:
        return None
    return read_task_head(preset.directory, cls.checkpoint_heads, allow_pickle=allow_pickle)


def _run_head(cls, preset):
    """The head of a run's model when that is a `cls` (a run trained further, or on a task of
    the same kind and size), with the run's label names; None for another class."""
    trained = preset.run_model
    if type(trained) is not cls or cls.checkpoint_heads is None:
        return None
    layer = cls.checkpoint_heads.layer
    label_names = RunDirectory.open(preset.checkpoint).info.get("label_names")
    return ReadHead(layer, trained.get_layer(layer).get_weights(),
                    {"label_names": label_names} if label_names else {})
