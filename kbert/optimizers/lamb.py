"""LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), the optimizer of
large-batch BERT pre-training; its schedule is `kbert.training.optimizer.WarmupPolynomialDecay`.

`Lamb` per variable, with Adam moments m, v (bias-corrected m̂, v̂):
    u = m̂ / (sqrt(v̂) + ε) + λ·w          (λ only where weight decay applies)
    r = ||w|| / ||u||                      (1 when either norm is 0, or for excluded variables)
    w ← w − lr · r · u
Variables excluded from weight decay (`exclude_from_weight_decay`: LayerNorm and biases for
BERT) are excluded from the layer adaptation too, as in the reference implementation.
"""

import keras
from keras import ops

from kbert.compat import SavedDecayExclusions, SummedDenseGradients


@keras.saving.register_keras_serializable(package="kbert")
class Lamb(SummedDenseGradients, SavedDecayExclusions, keras.optimizers.Optimizer):
    """LAMB with decoupled weight decay inside the trust ratio (module docstring).

    `weight_decay_rate` is LAMB's λ; the base class's own decoupled decay is left off so that
    decay is applied once, inside the update. Use `exclude_from_weight_decay(var_list=...)` /
    `(var_names=...)` as with AdamW. Gradients are summed over replicas, made dense and
    clipped before the update (`SummedDenseGradients`); the exclusions are saved with the
    optimizer (`SavedDecayExclusions`).
    """

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 weight_decay_rate=0.01, name="lamb", **kwargs):
        kwargs.pop("weight_decay", None)
        super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay_rate = weight_decay_rate

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"])

    def _decays(self, variable):
        return bool(self.weight_decay_rate) and self._use_weight_decay(variable)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign(m, m * self.beta_1 + gradient * (1.0 - self.beta_1))
        self.assign(v, v * self.beta_2 + ops.square(gradient) * (1.0 - self.beta_2))
        m_hat = m / (1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
        v_hat = v / (1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if self._decays(variable):
            update = update + self.weight_decay_rate * variable
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / (u_norm + 1e-30), 1.0)
        else:
            ratio = 1.0
        self.assign_sub(variable, lr * ratio * update)

    def get_config(self):
        config = super().get_config()
        config.update({"beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
                       "weight_decay_rate": self.weight_decay_rate})
        return config
