"""BERT's fine-tuning optimizer: AdamW, linear warmup then linear decay, no decay on LayerNorm/bias.

The recipe of the paper and of Google's `optimization.py`:
  * the learning rate rises linearly from 0 to `learning_rate` over the first
    `warmup_fraction` of the steps, then falls linearly to 0 at `total_steps`;
  * Adam with decoupled weight decay 0.01 (β1 0.9, β2 0.999, ε 1e-6), the decay not applied to
    LayerNorm scales/offsets (`gamma`, `beta`) nor to biases;
  * gradients clipped to a global norm of 1.0.

The schedule (`WarmupPolynomialDecay`) at step s (counted from 0, the step the optimizer is
about to take), with w = warmup steps and T = total steps:
    lr(s) = peak * s / w                                          for s < w
    lr(s) = (peak - end) * (1 - (s - w) / (T - w))^power + end    for w <= s <= T (end after T)
`power=1, end=0` is the paper's linear decay (Google's code calls it polynomial decay with
power 1.0); pre-training may use other powers.
Keras' AdamW applies the decay as `var -= var * weight_decay * lr(s)`, so the decay follows the
schedule too, as in Google's implementation.
"""

import keras

NO_DECAY_NAMES = (r"(^|/)(gamma|beta)(:\d+)?$", r"bias(:\d+)?$")
"""Variable-name patterns (`re.search` on the variable's name) excluded from weight decay. Both
forms matter: Keras' own name is "gamma", but on the TensorFlow backend AdamW checks the name of
the underlying `tf.Variable`, the full path "embeddings/layer_norm/gamma:0"."""


@keras.saving.register_keras_serializable(package="kbert")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to `peak_learning_rate` over `warmup_steps`, then polynomial decay to
    `end_learning_rate` at `total_steps` (see the module docstring)."""

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0, power=1.0,
                 end_learning_rate=0.0):
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}.")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"warmup_steps must be in [0, total_steps], got {warmup_steps}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
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
                "end_learning_rate": self.end_learning_rate}


def no_decay_variables(model):
    """The model's variables that BERT does not decay: every LayerNormalization weight and every
    bias (variables whose name ends in "bias")."""
    excluded = {id(v): v for v in model.trainable_variables if v.name.endswith("bias")}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.LayerNormalization):
            excluded.update((id(v), v) for v in layer.trainable_weights)
    return list(excluded.values())


def make_optimizer(learning_rate, total_steps, warmup_fraction=0.1, weight_decay=0.01,
                   clipnorm=1.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6, model=None):
    """BERT's AdamW for `total_steps` steps peaking at `learning_rate` (see module docstring).

    Weight decay skips LayerNorm and bias variables: when `model` is given, exactly the
    variables `no_decay_variables(model)` lists; otherwise by name (`gamma`, `beta`, `*bias`),
    which holds for every kbert layer. `clipnorm` is a global-norm clip (None: no clipping).
    """
    warmup_steps = int(round(warmup_fraction * total_steps))
    schedule = WarmupPolynomialDecay(learning_rate, total_steps, warmup_steps)
    optimizer = keras.optimizers.AdamW(
        learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2,
        epsilon=epsilon, global_clipnorm=clipnorm)
    if model is not None:
        optimizer.exclude_from_weight_decay(var_list=no_decay_variables(model))
    else:
        optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
