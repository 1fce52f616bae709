"""The one registry of the names kbert builds a model from, and the one function that builds it.

A name is one of:
  * a size preset ("tiny" ... "large", `kbert.config.PRESETS`): that shape, random weights, and
    the uncased BERT vocabulary (the standard 30,522 tokens, as MiniLM ships them);
  * a weights preset (`WEIGHT_PRESETS`): a checkpoint kbert fetches itself (`kbert.data.sources`),
    with its weights, vocabulary and casing;
  * a checkpoint: a Hugging Face, original Google or keras-hub directory, or a Google prefix;
  * a run directory of `kbert finetune`: its encoder and tokenizer as trained (a task fine-tuned
    after another, e.g. RTE from MNLI; the run's head too where the new model's task fits it);
  * "random:<any of these>": that model's shape, vocabulary and casing, random weights (the
    from-scratch baseline of the same model);
  * a `BertConfig`: that shape, random weights, the uncased BERT vocabulary.

`resolve_preset` turns a name into a `Preset` once. As keras-hub's loaders do, `load_backbone`
and `load_tokenizer` take the class to build, so this module imports no model or tokenizer
class: `BertBackbone.from_pretrained` and `BertTokenizer.from_pretrained` call it, and
`kbert.models.pretrained.load_backbone_and_tokenizer` builds the pair.
"""

import dataclasses
import functools
import os
import pathlib

from kbert import convert
from kbert.config import PRESETS, BertConfig
from kbert.data import sources
from kbert.runs import MODEL_FILE, RunDirectory
from kbert.text.tokenizer_files import casing_from_checkpoint, vocabulary_file
from kbert.text.tokenizer_files import (MAX_CHARS_PER_WORD, accents_from_checkpoint,
                                        max_chars_from_checkpoint)

WEIGHT_PRESETS = {
    "minilm_l6_h384_uncased": "minilm",  # preset name → artifact holding a HF BERT directory
}
DEFAULT_VOCABULARY = "minilm_l6_h384_uncased"
"""Whose vocab.txt a size preset or a bare `BertConfig` uses: BERT's uncased 30,522 tokens."""
RANDOM_PREFIX = "random:"


@dataclasses.dataclass(frozen=True)
class Preset:
    """What a name means. `checkpoint` is where the shape, weights and vocabulary come from
    (None for a size preset or a `BertConfig`, whose `size` it is); `load_weights` is False for
    random weights. The checkpoint's config and casing are read on first use, so a directory
    that holds only a vocabulary still serves a tokenizer."""

    name: str
    kind: str  # "size", "config", "weights" (a fetched checkpoint), "checkpoint" or "run"
    checkpoint: pathlib.Path = None
    size: BertConfig = None
    load_weights: bool = False

    @functools.cached_property
    def config(self) -> BertConfig:
        if self.kind == "run":
            return self.run_model.backbone.config
        return self.size if self.checkpoint is None else convert.read_config(self.checkpoint)

    @property
    def run_model(self):
        """A run's task model (kind "run"), whose encoder and tokenizer the name stands for."""
        return _run_model(self.checkpoint, (self.checkpoint / MODEL_FILE).stat().st_mtime_ns)

    @property
    def directory(self) -> pathlib.Path:
        """The folder holding vocab.txt and the casing files."""
        if self.checkpoint is None:
            return resolve(DEFAULT_VOCABULARY)
        return self.checkpoint if self.checkpoint.is_dir() else self.checkpoint.parent

    @property
    def vocabulary(self) -> pathlib.Path:
        return vocabulary_file(self.directory)

    @property
    def lowercase(self) -> bool:
        return True if self.checkpoint is None else casing_from_checkpoint(self.directory)


def _choices() -> str:
    return (f"size presets: {', '.join(PRESETS)}; weights presets: {', '.join(WEIGHT_PRESETS)}; "
            f"or a checkpoint directory, or {RANDOM_PREFIX}<any of these> for random weights")


def _no_weights(name) -> str:
    if name in PRESETS:
        return (f"{name!r} is a size preset without weights: build it with "
                f"BertBackbone(BertConfig.preset({name!r})), or with random weights and BERT's "
                f"vocabulary by kbert.models.pretrained.load_backbone_and_tokenizer({name!r}).")
    return (f"{name!r} means random weights; build it with "
            f"kbert.models.pretrained.load_backbone_and_tokenizer({name!r}).")


def resolve(path_or_preset) -> pathlib.Path:
    """The local checkpoint directory (or Google prefix) of a weights preset or a path."""
    if isinstance(path_or_preset, str) and path_or_preset in WEIGHT_PRESETS:
        return sources.fetch(WEIGHT_PRESETS[path_or_preset])
    path = pathlib.Path(os.fspath(path_or_preset)).expanduser()
    if path.exists() or pathlib.Path(f"{path}.index").is_file():
        return path
    if path_or_preset in PRESETS:
        raise FileNotFoundError(_no_weights(path_or_preset))
    raise FileNotFoundError(f"No checkpoint at {path} and no preset named {path_or_preset!r}; "
                            f"{_choices()}.")


def resolve_preset(name) -> Preset:
    """The `Preset` a name (see the module docstring) stands for."""
    if isinstance(name, Preset):
        return name
    if isinstance(name, BertConfig):
        return Preset(name="config", kind="config", size=name)
    if isinstance(name, str) and name.startswith(RANDOM_PREFIX):
        inner = resolve_preset(name[len(RANDOM_PREFIX):])
        return dataclasses.replace(inner, name=name, load_weights=False)
    if isinstance(name, str) and name in PRESETS:
        return Preset(name=name, kind="size", size=PRESETS[name])
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"A preset name is a string, a path or a BertConfig, not "
                        f"{type(name).__name__}; {_choices()}.")
    if RunDirectory.is_run(name):
        return Preset(name=os.fspath(name), kind="run", checkpoint=pathlib.Path(name),
                      load_weights=True)
    kind = "weights" if name in WEIGHT_PRESETS else "checkpoint"
    return Preset(name=os.fspath(name), kind=kind, checkpoint=resolve(name), load_weights=True)


def load_backbone(name, cls, allow_pickle=False, require_weights=False, **kwargs):
    """`cls` (a `BertBackbone`) for `name`, built with `kwargs` (dtype, causal, ...), holding
    the checkpoint's weights unless the name means random weights; with `require_weights`
    such a name is an error (`BertBackbone.from_pretrained`). Dropout rates in `kwargs`
    replace the name's (`BertConfig.with_rates_from`)."""
    preset = resolve_preset(name)
    if preset.load_weights and preset.kind == "run":
        trained = preset.run_model.backbone
        kwargs.setdefault("causal", trained.causal)
        backbone = cls(preset.config.with_rates_from(kwargs), **kwargs)
        backbone.set_weights(trained.get_weights())
        return backbone
    if preset.load_weights:
        return convert.load_backbone(cls, preset.checkpoint, allow_pickle=allow_pickle, **kwargs)
    if require_weights:
        raise FileNotFoundError(_no_weights(preset.name))
    return cls(preset.config.with_rates_from(kwargs), **kwargs)


def load_tokenizer(name, cls, lowercase=None, max_chars_per_word=None, **kwargs):
    """`cls` (a `BertTokenizer`) on the vocabulary of `name`; casing per
    `casing_from_checkpoint`, accents per `accents_from_checkpoint` and the word-length limit per
    `max_chars_from_checkpoint` unless given. A size preset or a `BertConfig` only borrows a
    vocabulary: kbert's own (Google's) limit."""
    preset = resolve_preset(name)
    if preset.kind == "run":  # the tokenizer the run was trained with, its settings unless given
        trained = preset.run_model.preprocessor.tokenizer.get_config()
        given = {"lowercase": lowercase, "max_chars_per_word": max_chars_per_word,
                 "strip_accents": kwargs.pop("strip_accents", None)}
        settings = {key: trained[key] if value is None else value
                    for key, value in given.items()}
        return cls(vocabulary=trained["vocabulary"], **settings, **kwargs)
    lowercase = preset.lowercase if lowercase is None else lowercase
    if max_chars_per_word is None:
        max_chars_per_word = (MAX_CHARS_PER_WORD if preset.checkpoint is None
                              else max_chars_from_checkpoint(preset.directory))
    if kwargs.get("strip_accents") is None and preset.checkpoint is not None:
        kwargs["strip_accents"] = accents_from_checkpoint(preset.directory)
    return cls(vocabulary=preset.vocabulary, lowercase=lowercase,
               max_chars_per_word=max_chars_per_word, **kwargs)



def load_pretraining_heads(pretrainer, name, allow_pickle=False):
    """The pre-training heads of the checkpoint `name` means, loaded into `pretrainer` (a
    `BertPretrainer` built on that checkpoint's backbone): `convert.load_pretraining_heads`.
    Returns the names of the heads loaded; none for a name with random weights or a run."""
    preset = resolve_preset(name)
    if preset.kind not in ("weights", "checkpoint") or not preset.load_weights:
        return []
    return convert.load_pretraining_heads(pretrainer, preset.checkpoint,
                                          allow_pickle=allow_pickle)


@functools.lru_cache(maxsize=1)
def _run_model(path, modified):
    """A run's saved model, loaded once for the config, encoder, tokenizer and head that one
    name gives (`modified`: a run written again is read again)."""
    return RunDirectory.open(path).load_model()
