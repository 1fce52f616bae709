"""`FinetuneConfig`: every setting of one fine-tuning run, checked before any work starts."""

import dataclasses
import math
import numbers

from kbert.config_checks import RATE_FIELDS, field_problem
from kbert.layers.attention_kernel import IMPLEMENTATIONS, check_implementation
from kbert.settings import setting
from kbert.training.optimizer import dtype_policy


@dataclasses.dataclass
class FinetuneConfig:
    """The settings of one fine-tuning run (the task's own options go to its spec).

    `kbert finetune` takes each as an option of the same name (`kbert.settings`).

    Args:
        init: the pretrained checkpoint directory, weights preset or kbert run directory to
            start from (one fine-tuned for the task brings its head); a size preset (mini,
            ...) for random weights, or random:NAME for random weights of that shape.
        epochs: passes over the train split.
        steps: train this many steps instead of epochs.
        batch_size: examples a step.
        sequence_length: the packed length (default: the task's, 128; SQuAD 384).
        learning_rate: the peak learning rate (default 5e-5; 1e-3 with mode feature, where
            only a head trains).
        max_train_examples: train on a random subset of this size.
        max_eval_examples: score a fixed subset of this size.
        mode: finetune (all weights), or feature (frozen BERT, last four layers into a BiLSTM).
        warmup_fraction: the share of the steps whose learning rate rises linearly.
        weight_decay: AdamW's decoupled weight decay (not on LayerNorm and biases).
        seed: the seed of the weights, the data order and the subsets.
        verbose: Keras' progress output (0, 1 or 2).
        attention_sentence: a sentence whose attention heatmaps go to TensorBoard while
            training (OUTPUT/logs/attention).
        xla: compile with XLA or not (batches padded to a multiple of 16). Default: kbert
            chooses: on JAX; on TensorFlow the trimmed batches run without it.
        mixed_precision: compute in bfloat16 (bf16; faster than float32 on some CPUs, slower
            on others) or float16 (fp16: GPUs, with loss scaling); weights stay float32.
        validate: score the dev split after every epoch (TensorBoard's validation run) or
            not. Default: yes, unless keep_best, whose pass over dev is then the epoch's one.
            The final dev and test scores run either way.
        keep_best: score dev with the task's metric after every epoch (with steps, every
            checkpoint) and end with the best one's weights (Hugging Face's
            load_best_model_at_end); the final dev score is then that choice's.
        attention: the attention kernel (`kbert.layers.attention_kernel`). Default auto: on
            an NVIDIA GPU under JAX, cuDNN's, or kbert's flash kernel in training with
            attention dropout; the einsum elsewhere.
        hidden_dropout: the encoder's dropout rate after the embeddings and each sub-layer
            (default: the checkpoint's, 0.1).
        attention_dropout: dropout on the attention probabilities (default: the
            checkpoint's, 0.1). Without it a GPU may run the fused kernels
            (benchmarks/results/attention-dropout.json: what it costs in accuracy).
        allow_pickle: read an init directory's pytorch_model.bin (unpickling runs code:
            trusted files only).
        output_dir: the run directory.
        overwrite: replace a finished run in the output directory by training afresh (its
            evaluations and logs too); without it such a directory is refused.
    """

    init: str = setting("minilm_l6_h384_uncased", group="start", cli_default=None)
    epochs: int = 3
    steps: int = None
    batch_size: int = 32
    sequence_length: int = None
    learning_rate: float = None
    max_train_examples: int = None
    max_eval_examples: int = None
    mode: str = setting("finetune", choices=("finetune", "feature"))
    warmup_fraction: float = setting(0.1, kind="fraction")
    weight_decay: float = setting(0.01, kind="number")
    seed: int = setting(0, kind="index")
    verbose: int = setting(1, kind="index", choices=(0, 1, 2))
    attention_sentence: str = setting(None, flag="--attention-images", metavar="SENTENCE")
    xla: bool | None = None
    mixed_precision: str = setting(None, choices=("bf16", "fp16"))
    validate: bool | None = setting(None, flag="--validation")
    keep_best: bool = False
    attention: str = setting("auto", choices=IMPLEMENTATIONS)
    hidden_dropout: float = setting(None, kind="rate")
    attention_dropout: float = setting(None, kind="rate")
    allow_pickle: bool = False
    output_dir: str = setting("runs/finetune", flag="--output")
    overwrite: bool = False

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
