"""`FinetuneConfig`: every setting of one fine-tuning run, checked before any work starts."""

import dataclasses
import math
import numbers

from kbert.config_checks import RATE_FIELDS, field_problem
from kbert.layers.attention_kernel import check_implementation
from kbert.training.precision import dtype_policy


@dataclasses.dataclass
class FinetuneConfig:
    """The settings of one fine-tuning run (the task's own options go to its spec).

    init: pretrained checkpoint dir, weights preset or kbert run dir (one fine-tuned for the
      task brings its head: `start_from_fine_tuned_head`); a size preset ("mini", ...) for random
      weights; "random:<checkpoint>" for random weights of that checkpoint's shape.
    allow_pickle: read an `init` directory's pytorch_model.bin (unpickling runs code: trusted
      files only); without it such a checkpoint is refused, with a clear error.
    epochs, steps: train `steps` steps if given, else `epochs` passes over the train split.
    sequence_length: the packed length (default: the task's, 128; SQuAD 384).
    learning_rate: peak rate (default 5e-5; 1e-3 with mode="feature", where only a head trains).
    max_train_examples: a random train subset of this size (chosen with `seed`).
    max_eval_examples: score at most this many dev / test examples (a fixed subset).
    mode: "finetune" (all weights) or "feature" (frozen BERT, last four layers into a BiLSTM).
    attention_sentence: a text whose attention heatmaps go to TensorBoard while training.
    xla: compile with XLA (batches padded to a multiple of 16) or not; None: kbert's choice
      (`kbert.models.xla`: on JAX; on TensorFlow the trimmed batches run without it).
    mixed_precision: None (float32), "bf16" or "fp16" (loss scaling); weights stay float32.
    validate: the dev split's loss and metrics after every epoch (TensorBoard's validation run);
      False trains without them (Hugging Face's Trainer default) and leaves the weights and
      the final dev / test scores as they are. None (default): True unless `keep_best`, whose
      pass over dev is then the epoch's only one.
    keep_best: score dev with the task's metric after every epoch (with `steps`, every
      checkpoint) and end with the best epoch's weights (`kbert.training.best_epoch`); the
      final dev score is then that choice's, so test (where the task has one) is the fair one.
      The score joins the epoch's logs as `val_<metric>` (TensorBoard's validation run).
    attention: the backbone's `attention_implementation` (`kbert.layers.attention_kernel`).
    overwrite: an `output_dir` that holds a finished run is refused unless True, which trains
      afresh and replaces it; an unfinished one's checkpoints are then dropped, not resumed.
    hidden_dropout, attention_dropout: the encoder's dropout rates in [0, 1); None keeps the
      checkpoint's (BERT's 0.1). Without attention dropout a GPU may run the fused kernels
      (benchmarks/results/attention-dropout.json: what it costs in accuracy).
    """

    init: str = "minilm_l6_h384_uncased"
    allow_pickle: bool = False
    output_dir: str = "runs/finetune"
    overwrite: bool = False
    epochs: int = 3
    steps: int = None
    batch_size: int = 32
    sequence_length: int = None
    learning_rate: float = None
    max_train_examples: int = None
    max_eval_examples: int = None
    mode: str = "finetune"
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    verbose: int = 1
    attention_sentence: str = None
    xla: bool | None = None
    mixed_precision: str = None
    validate: bool | None = None
    keep_best: bool = False
    attention: str = "auto"
    hidden_dropout: float = None
    attention_dropout: float = None

    def __post_init__(self):
        """Every setting checked before any work starts (a bool is not a count, NaN is not
        a rate); the model's own limits are checked by `_checked_spec`."""
        counts = ("steps", "batch_size", "max_train_examples", "max_eval_examples",
                  "sequence_length") + (("epochs",) if self.steps is None else ())
        for name in counts:
            value = getattr(self, name)
            if value is not None and not _is_count(value):
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if self.steps is None and self.epochs is None:
            raise ValueError("Give a positive number of epochs or steps.")
        if not _is_count(self.seed, minimum=0):
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}.")
        if self.learning_rate is not None and not _in_range(self.learning_rate, 0, math.inf) \
                or self.learning_rate == 0:
            raise ValueError(f"learning_rate must be positive and finite, got "
                             f"{self.learning_rate!r}.")
        for name, high in (("warmup_fraction", 1), ("weight_decay", math.inf)):
            if not _in_range(getattr(self, name), 0, high):
                raise ValueError(f"{name} must be a finite number in [0, {high}], got "
                                 f"{getattr(self, name)!r}.")
        if not isinstance(self.validate, bool | None):
            raise ValueError(f"validate must be True, False or None, got {self.validate!r}.")
        for name in ("keep_best", "overwrite"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        check_implementation(self.attention, "attention")
        for name, rate in self.dropout_rates.items():  # BertConfig's own rule for its rates
            if problem := field_problem(name, rate):
                raise ValueError(f"{name} {problem}, got {rate!r}.")
        if self.mode not in ("finetune", "feature"):
            raise ValueError(f"mode must be 'finetune' or 'feature', got {self.mode!r}.")

    def settings(self, spec, sequence_length, total_steps):
        """The settings a run records (metrics.json, run.json)."""
        return {"epochs": self.epochs if self.steps is None else 1, "steps": total_steps,
                "batch_size": self.batch_size, "sequence_length": sequence_length,
                "learning_rate": self.peak_learning_rate, "warmup_fraction": self.warmup_fraction,
                "weight_decay": self.weight_decay, "seed": self.seed,
                "mixed_precision": dtype_policy(self.mixed_precision), "mode": self.mode,
                "validate": self.validates, "keep_best": self.keep_best,
                "attention": self.attention, **self.dropout_rates}

    @property
    def validates(self):
        """Whether Keras' validation pass runs after every epoch (`validate`, resolved)."""
        return not self.keep_best if self.validate is None else self.validate

    @property
    def dropout_rates(self):
        """The encoder's dropout rates this run sets (the others stay the checkpoint's)."""
        return {name: getattr(self, name) for name in RATE_FIELDS
                if getattr(self, name) is not None}

    @property
    def peak_learning_rate(self):
        if self.learning_rate is not None:
            return self.learning_rate
        return 1e-3 if self.mode == "feature" else 5e-5


def _is_count(value, minimum=1):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and \
        value >= minimum


def _in_range(value, low, high):
    """A real number (not a bool), finite, in [low, high]."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and \
        math.isfinite(value) and low <= value <= high
