"""BERT's fine-tuning optimizer: AdamW, linear warmup then linear decay, no decay on LayerNorm/bias.

The recipe of the paper and of Google's `optimization.py`:
  * the learning rate rises linearly from 0 to `learning_rate` over the first
    `warmup_fraction` of the steps, then falls linearly to 0 at `total_steps`;
  * Adam with decoupled weight decay 0.01 (β1 0.9, β2 0.999, ε 1e-6, added to √v̂ as in Adam's
    Algorithm 1), the decay not applied to LayerNorm scales/offsets (`gamma`, `beta`) nor to
    biases;
  * gradients clipped to a global norm of 1.0.

The schedule (`WarmupPolynomialDecay`) at step s (counted from 0, the step the optimizer is
about to take), with w = warmup steps and T = total steps:
    lr(s) = peak * s / w                                          for s < w
    lr(s) = (peak - end) * (1 - (s - w) / (T - w))^power + end    for w <= s <= T (end after T)
`power=1, end=0` is the paper's linear decay (Google's code calls it polynomial decay with
power 1.0); pre-training may use other powers. Keras evaluates a schedule at its batch counter,
which under `gradient_accumulation_steps=k` advances k times per update; `batches_per_step=k`
keeps s counting updates.
Keras' AdamW applies the decay as `var -= var * weight_decay * lr(s)`, so the decay follows the
schedule too, as in Google's implementation.

The update rules themselves (`AdamW`, `Lamb`) are in `kbert.optimizers`.
"""

import keras

from kbert.optimizers import AdamW, Lamb

NO_DECAY_NAMES = (r"(^|/)(gamma|beta)(:\d+)?$", r"bias(:\d+)?$")
"""Variable-name patterns (`re.search` on the variable's name) excluded from weight decay. Both
forms matter: Keras' own name is "gamma", but on the TensorFlow backend AdamW checks the name of
the underlying `tf.Variable`, the full path "embeddings/layer_norm/gamma:0"."""


@keras.saving.register_keras_serializable(package="kbert")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' dynamic loss scaling for float16 training, with two fixes.

    * A step skipped for non-finite gradients still counts in `iterations` (as in tf.keras 2),
      so the schedule, the step budget and the checkpoints stay on their steps while the scale
      comes down from 2^15; the skipped step is an update of zero. Under gradient accumulation
      it also drops what was accumulated for that update.
    * Under a multi-replica strategy the step is skipped when any replica's gradients are
      non-finite (Keras checks the first replica's only, before they are all-reduced).

    `make_optimizer` wraps its optimizer in this class for float16 training.

    Args:
      inner_optimizer: the optimizer whose updates are loss-scaled.
      **kwargs: Keras' `LossScaleOptimizer` arguments (`initial_scale`,
        `dynamic_growth_steps`, ...).

    Examples:
        >>> import keras
        >>> import kbert
        >>> optimizer = kbert.training.optimizer.LossScaleOptimizer(keras.optimizers.SGD())
        >>> type(optimizer.inner_optimizer).__name__
        'SGD'
    """

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        if keras.backend.backend() != "tensorflow":
            return finite
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return finite
        overflowed = context.all_reduce("SUM", tf.cast(tf.logical_not(finite), tf.float32))
        return tf.equal(overflowed, 0.0)

    def _stateful_handle_non_finite_grads(self):
        super()._stateful_handle_non_finite_grads()
        inner = self.inner_optimizer
        if inner.gradient_accumulation_steps:
            keras.ops.cond(
                keras.ops.equal((inner._iterations + 1) % inner.gradient_accumulation_steps, 0),
                inner._backend_reset_gradient_accumulators, lambda: None)
        inner._iterations.assign_add(1)


@keras.saving.register_keras_serializable(package="kbert")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's learning-rate schedule: linear warmup, then polynomial (by default linear) decay.

    At step s (counted from 0) the rate is `peak_learning_rate * s / warmup_steps` during the
    warmup, then `(peak - end) * (1 - (s - warmup_steps) / (total_steps - warmup_steps))^power
    + end`, and `end_learning_rate` after `total_steps`. Keras calls a schedule with its batch
    counter; under gradient accumulation of k batches per update, `batches_per_step=k` keeps
    s counting updates.

    Args:
      peak_learning_rate: the rate at the end of the warmup.
      total_steps: the steps (updates) of the whole run, where the decay ends.
      warmup_steps: the steps of the linear warmup, in [0, total_steps].
      power: the power of the polynomial decay (1.0: linear, as in BERT).
      end_learning_rate: the rate at `total_steps` and after.
      batches_per_step: the batches that make one step (gradient accumulation).

    Examples:
        >>> import kbert
        >>> schedule = kbert.training.WarmupPolynomialDecay(1e-3, total_steps=10, warmup_steps=2)
        >>> [round(float(schedule(step)), 6) for step in (0, 1, 2, 6, 10, 20)]
        [0.0, 0.0005, 0.001, 0.0005, 0.0, 0.0]
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0, power=1.0,
                 end_learning_rate=0.0, batches_per_step=1):
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}.")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"warmup_steps must be in [0, total_steps], got {warmup_steps}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)
        self.batches_per_step = max(1, int(batches_per_step))

    def __call__(self, step):
        step = keras.ops.cast(keras.ops.floor_divide(step, self.batches_per_step), "float32")
        warmup = float(max(self.warmup_steps, 1))
        span = float(max(self.total_steps - self.warmup_steps, 1))
        rising = self.peak_learning_rate * step / warmup
        progress = keras.ops.clip((step - self.warmup_steps) / span, 0.0, 1.0)
        falling = ((self.peak_learning_rate - self.end_learning_rate)
                   * keras.ops.power(1.0 - progress, self.power) + self.end_learning_rate)
        return keras.ops.where(step < self.warmup_steps, rising, falling)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "power": self.power,
                "end_learning_rate": self.end_learning_rate,
                "batches_per_step": self.batches_per_step}


def no_decay_variables(model):
    """The variables of `model` that BERT's optimizer does not decay.

    Args:
      model: a Keras model (or layer).

    Returns:
      The trainable weights of every `keras.layers.LayerNormalization` and every trainable
      variable whose name ends in "bias", each once.

    Examples:
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> excluded = kbert.training.no_decay_variables(backbone)
        >>> sorted({v.name for v in excluded})
        ['beta', 'bias', 'gamma']
    """
    excluded = {id(v): v for v in model.trainable_variables if v.name.endswith("bias")}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.LayerNormalization):
            excluded.update((id(v), v) for v in layer.trainable_weights)
    return list(excluded.values())


OPTIMIZERS = ("adamw", "lamb")
"""What `make_optimizer(optimizer=...)` builds: `kbert.optimizers.AdamW` or `.Lamb`."""


def make_optimizer(learning_rate, total_steps, warmup_fraction=0.1, weight_decay=0.01,
                   clipnorm=1.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6, model=None,
                   loss_scale=None, *, optimizer="adamw", warmup_steps=None, decay_power=1.0,
                   gradient_accumulation_steps=1):
    """Builds BERT's optimizer: AdamW with linear warmup and decay, no decay on LayerNorm/bias.

    The learning rate follows `WarmupPolynomialDecay` over `total_steps` updates; weight decay
    skips LayerNorm and bias variables; gradients are clipped to a global norm. Fine-tuning
    (`finetune`) and pre-training (`pretrain`) both build their optimizer here.

    Args:
      learning_rate: the peak learning rate.
      total_steps: the optimizer updates of the whole run; the rate reaches 0 there.
      warmup_fraction: the fraction of `total_steps` spent warming up (when `warmup_steps`
        is None).
      weight_decay: the decoupled weight decay (LAMB's λ with `optimizer="lamb"`); it follows
        the schedule, as in Google's implementation.
      clipnorm: the global norm gradients are clipped to; None: no clipping.
      beta_1, beta_2, epsilon: Adam's moments and ε (added to √v̂).
      model: the model to train. With it, exactly `no_decay_variables(model)` skip weight
        decay; without it, variables named "gamma", "beta" or "*bias" do.
      loss_scale: wrap the optimizer in kbert's `LossScaleOptimizer` (float16 training);
        None: when `model` computes in "mixed_float16".
      optimizer: "adamw" (`kbert.optimizers.AdamW`) or "lamb" (`kbert.optimizers.Lamb`).
      warmup_steps: the warmup in updates, instead of `warmup_fraction` (capped at
        `total_steps`).
      decay_power: the power of the polynomial decay (1.0: linear).
      gradient_accumulation_steps: k sums the gradients of k batches per update; the
        schedule still counts updates.

    Returns:
      The `kbert.optimizers.AdamW` or `Lamb`, wrapped in a `LossScaleOptimizer` when
      `loss_scale` applies.

    Examples:
        >>> import kbert
        >>> optimizer = kbert.make_optimizer(5e-5, total_steps=1000)
        >>> type(optimizer).__name__, optimizer.weight_decay, optimizer.global_clipnorm
        ('AdamW', 0.01, 1.0)
        >>> lamb = kbert.make_optimizer(1e-3, 1000, optimizer="lamb", warmup_steps=100,
        ...                             loss_scale=True)
        >>> type(lamb).__name__, type(lamb.inner_optimizer).__name__
        ('LossScaleOptimizer', 'Lamb')
        >>> model = kbert.BertClassifier(kbert.BertBackbone(kbert.BertConfig.preset("tiny")))
        >>> model.compile(optimizer=kbert.make_optimizer(5e-5, total_steps=100, model=model))
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
    if warmup_steps is None:
        warmup_steps = int(round(warmup_fraction * total_steps))
    else:
        warmup_steps = min(int(warmup_steps), int(total_steps))
    accumulation = gradient_accumulation_steps if gradient_accumulation_steps > 1 else None
    schedule = WarmupPolynomialDecay(learning_rate, total_steps, warmup_steps, decay_power,
                                     batches_per_step=accumulation or 1)
    common = dict(learning_rate=schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                  global_clipnorm=clipnorm, gradient_accumulation_steps=accumulation)
    if optimizer == "lamb":
        built = Lamb(weight_decay_rate=weight_decay, **common)
    else:
        built = AdamW(weight_decay=weight_decay, **common)
    if model is not None:
        built.exclude_from_weight_decay(var_list=no_decay_variables(model))
    else:
        built.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    if loss_scale is None:
        loss_scale = getattr(getattr(model, "dtype_policy", None), "name", "") == "mixed_float16"
    return LossScaleOptimizer(built) if loss_scale else built


# --- mixed precision -----------------------------------------------------------------------------
# Mixed precision by its short name, as the CLI and the training functions take it.
# 
# "bf16" computes in bfloat16 with float32 weights: no loss scaling needed. Whether it is faster
# than float32 depends on the CPU (benchmarks/results/cpu-cases-mini-bf16.json).
# "fp16" computes in float16 and needs dynamic loss scaling (`LossScaleOptimizer`).

POLICIES = {None: None, "fp32": None, "float32": None,
            "bf16": "mixed_bfloat16", "bfloat16": "mixed_bfloat16",
            "mixed_bfloat16": "mixed_bfloat16",
            "fp16": "mixed_float16", "float16": "mixed_float16", "mixed_float16": "mixed_float16"}


def dtype_policy(mixed_precision):
    """The Keras dtype policy name for `mixed_precision` (None means plain float32)."""
    if mixed_precision not in POLICIES:
        raise ValueError(f"mixed_precision must be one of None, 'bf16', 'fp16'; got "
                         f"{mixed_precision!r}.")
    return POLICIES[mixed_precision]


def needs_loss_scale(policy):
    """Whether training under `policy` needs dynamic loss scaling (float16's narrow range)."""
    return policy == "mixed_float16"
