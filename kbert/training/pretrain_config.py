"""`PretrainConfig`: every setting of one pre-training run, checked before any work starts."""

import dataclasses
import math
import numbers
import os

from kbert.config import BertConfig
from kbert.layers.attention_kernel import check_implementation
from kbert.text.masking import default_max_predictions
from kbert.training.optimizer import OPTIMIZERS
from kbert.training.precision import dtype_policy

CORPUS_FORMATS = ("auto", "sentences", "text")
_MAY_BE_ZERO = ("warmup_steps", "checkpoint_every")


@dataclasses.dataclass
class PretrainConfig:
    """The settings of one `pretrain()` run; the CLI's flags map one to one.

    output_dir: the run folder (metrics.json, logs/, checkpoints/, model/). `overwrite`
      replaces another folder there (`kbert.outputs`) once the new run is complete.
    preset: the fresh model, a name of `kbert.presets` that means random weights ("tiny" ...
      "large", "random:<checkpoint>"); or `bert_config`, a `BertConfig`; or `init`, a checkpoint
      or weights preset to continue from. `vocabulary` (vocab.txt, token list or tokenizer)
      replaces BERT's uncased vocabulary for a fresh model. `allow_pickle` lets an `init`
      directory's pytorch_model.bin be read (unpickling runs code: trusted files only).
    corpus: None (Wikipedia), text files / folder / glob (`corpus_format`), or a TFRecord folder.
    steps: optimizer updates, or `epochs` passes over the training pairs (exactly one).
    batch_size: per update (the global batch); `gradient_accumulation_steps` k makes each
      update consume k batches.
    learning_rate: the peak; `optimizer` "adamw" or "lamb"; `warmup_steps` (default
      `warmup_fraction` of the steps); `decay_power` 1 is linear; `weight_decay`, `clipnorm`.
    mixed_precision: None, "bf16" or "fp16" (dynamic loss scaling); `jit_compile` for XLA (None: kbert's choice, `kbert.models.xla`).
    checkpoint_every: updates between checkpoints (None or 0: one at the end).
    strategy: a name for `kbert.training.distribution.get_strategy`, or a strategy.
    whole_word, mask_rate, max_predictions (default 20 at length 128), nsp (False: the No-NSP
      ablation), short_seq_prob: the masking and pairing of the data. `causal` trains a
      left-to-right LM instead (a causal backbone, every position predicting the next token;
      with nsp=False, the paper's LTR ablation); masking settings do not apply to it.
    attention: the backbone's `attention_implementation` (`kbert.layers.attention_kernel`).
    heldout_documents: documents held out (default 5% up to 500); `eval_examples` pairs scored.
    log_every: batches between TensorBoard step logs; `profile_batches` a batch or a (first,
      last) pair, counted from this call's first batch, traced with the TensorFlow profiler.
    """

    output_dir: str | os.PathLike
    overwrite: bool = False
    preset: str = "mini"
    init: str | os.PathLike | None = None
    allow_pickle: bool = False
    bert_config: BertConfig | None = None
    vocabulary: object = None
    corpus: object = None
    corpus_format: str = "auto"
    steps: int | None = None
    epochs: int | None = None
    batch_size: int = 32
    sequence_length: int = 128
    learning_rate: float = 1e-4
    optimizer: str = "adamw"
    warmup_steps: int | None = None
    warmup_fraction: float = 0.01
    decay_power: float = 1.0
    weight_decay: float = 0.01
    clipnorm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    mixed_precision: str | None = None
    jit_compile: bool | None = None
    checkpoint_every: int | None = 1000
    strategy: object = None
    whole_word: bool = False
    mask_rate: float = 0.15
    max_predictions: int | None = None
    nsp: bool = True
    causal: bool = False
    attention: str = "auto"
    short_seq_prob: float = 0.1
    heldout_documents: int | None = None
    eval_examples: int = 2048
    seed: int = 0
    log_every: int = 10
    profile_batches: int | tuple | None = None
    save_model: bool = True
    verbose: object = "auto"

    def __post_init__(self):
        if self.output_dir is None:
            raise ValueError("output_dir is required: the folder the run writes to.")
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("Give exactly one of `steps` and `epochs`.")
        for name in ("steps", "epochs", "batch_size", "sequence_length", "eval_examples",
                     "gradient_accumulation_steps", "log_every", "checkpoint_every",
                     "max_predictions", "heldout_documents", "warmup_steps"):
            _check_int(self, name, minimum=0 if name in _MAY_BE_ZERO else 1)
        _check_int(self, "seed", minimum=0)
        if not _is_number(self.mask_rate) or not 0 < self.mask_rate < 1:
            raise ValueError(f"mask_rate must be in (0, 1), got {self.mask_rate!r}.")
        for name, low, high in (("short_seq_prob", 0, 1),
                                ("warmup_fraction", 0, 1), ("weight_decay", 0, math.inf),
                                ("decay_power", 0, math.inf)):
            _check_range(self, name, low, high)
        if not _is_number(self.learning_rate) or not 0 < self.learning_rate < math.inf:
            raise ValueError(f"learning_rate must be positive and finite, got "
                             f"{self.learning_rate!r}.")
        if self.clipnorm is not None and (not _is_number(self.clipnorm)
                                          or not 0 < self.clipnorm < math.inf):
            raise ValueError(f"clipnorm must be positive and finite, or None, got "
                             f"{self.clipnorm!r}.")
        check_implementation(self.attention, "attention")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}.")
        if self.corpus_format not in CORPUS_FORMATS:
            raise ValueError(f"corpus_format must be one of {CORPUS_FORMATS}, got "
                             f"{self.corpus_format!r}.")
        dtype_policy(self.mixed_precision)  # raises for an unknown name
        if self.causal and (self.whole_word or self.max_predictions is not None):
            raise ValueError("causal=True trains a left-to-right LM on every next token; "
                             "whole_word and max_predictions are masking settings.")
        self._check_model()
        self._check_profile_batches()
        self.model_config.check_sequence_length(self.sequence_length)
        self._check_corpus()

    def _check_model(self):
        if self.bert_config is not None and not isinstance(self.bert_config, BertConfig):
            raise ValueError(f"bert_config must be a BertConfig, got "
                             f"{type(self.bert_config).__name__}.")
        if self.init and self.bert_config is not None:
            raise ValueError("Give `init` (pretrained weights) or `bert_config` (a fresh "
                             "model), not both.")
        if self.init and self.vocabulary is not None:
            raise ValueError("`vocabulary` is for a fresh model; `init` brings its own.")
        if not self.init and self.bert_config is None:
            from kbert.presets import resolve_preset

            if resolve_preset(self.preset).load_weights:
                raise ValueError(f"preset {self.preset!r} has pretrained weights: pass it as "
                                 "`init`; `preset` names a fresh model.")

    def _check_corpus(self):
        """A corpus path that names no file fails here, before the run creates its folder."""
        if isinstance(self.corpus, (str, os.PathLike)):
            from kbert.data.pretraining.documents import corpus_files
            from kbert.training.pretrain_data import is_tfrecord_dir

            if not is_tfrecord_dir(self.corpus):
                corpus_files(self.corpus)

    def _check_profile_batches(self):
        batches = self.profile_batches
        if batches is None:
            return
        pair = (batches, batches) if isinstance(batches, int) else tuple(batches)
        if len(pair) != 2 or not all(isinstance(b, int) and b >= 1 for b in pair) or \
                pair[0] > pair[1]:
            raise ValueError(f"profile_batches must be a batch number or a (first, last) pair "
                             f"counted from 1, got {batches!r}.")

    @property
    def accumulation(self) -> int:
        return self.gradient_accumulation_steps

    @property
    def policy(self):
        """The Keras dtype policy name (None: float32)."""
        return dtype_policy(self.mixed_precision)

    @property
    def predictions(self) -> int:
        """Predictions per sequence: `max_predictions` or its default for the length; for a
        causal LM every position but the last."""
        if self.causal:
            return self.sequence_length - 1
        return self.max_predictions or default_max_predictions(self.sequence_length,
                                                               self.mask_rate)

    @property
    def model_config(self) -> BertConfig:
        """The shape of the model this run trains, read without building it."""
        from kbert.presets import resolve_preset

        return resolve_preset(self.model_name).config

    @property
    def model_name(self):
        """What `kbert.presets` builds: the checkpoint, the config, or the preset."""
        return self.init or self.bert_config or self.preset


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_int(config, name, minimum):
    value = getattr(config, name)
    if value is None:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        kind = "a positive integer" if minimum else "a non-negative integer"
        raise ValueError(f"{name} must be {kind}, got {value!r}.")


def _check_range(config, name, low, high):
    value = getattr(config, name)
    if not _is_number(value) or not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}.")
