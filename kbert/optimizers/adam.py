"""Adam as Kingma & Ba's Algorithm 1 writes it (as `torch.optim.Adam` / `AdamW` do), from the
summed dense gradient: `Adam`, what a task model's `compile()` trains with, and `AdamW`, BERT's
fine-tuning and pre-training optimizer (`kbert.training.make_optimizer`)."""

import keras
from keras import ops

from kbert.compat import SavedDecayExclusions, SummedDenseGradients


class AlgorithmOneStep:
    """Optimizer mixin for Keras' Adam family: ε where Adam's Algorithm 1 puts it, on TensorFlow
    in one fused kernel per variable.

    Algorithm 1 steps by lr·m̂/(√v̂ + ε). Keras adds ε to √v before the bias correction, which
    is Algorithm 1 with ε/√(1 - β2^t): 32× BERT's ε=1e-6 at the first step, 2× at the 277th.
    Updates of weights whose gradients are that small (many, once the global norm is clipped
    to 1) came out damped, so SQuAD fine-tuning learned slower than Hugging Face's from the
    same weights and batches. Here ε is scaled by √(1 - β2^t) before it enters Keras' form, which gives
    Algorithm 1 exactly.
    """

    def __init__(self, *args, amsgrad=False, **kwargs):
        if amsgrad:
            raise ValueError(f"kbert's {type(self).__name__} has no amsgrad variant; use "
                             f"keras.optimizers.{type(self).__name__}.")
        super().__init__(*args, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        beta_1_power, beta_2_power = ops.power(beta_1, step), ops.power(beta_2, step)
        epsilon = ops.cast(self.epsilon, dtype) * ops.sqrt(1.0 - beta_2_power)
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            # ApplyAdam: m += (g - m)(1 - β1), v += (g² - v)(1 - β2),
            # var -= lr·√(1 - β2^t)/(1 - β1^t) · m/(√v + ε), in one pass over the variable
            # and its moments where Keras' ops make a dozen.
            return tf.raw_ops.ResourceApplyAdam(
                var=variable.handle, m=m.handle, v=v.handle, beta1_power=beta_1_power,
                beta2_power=beta_2_power, lr=lr, beta1=beta_1, beta2=beta_2,
                epsilon=epsilon, grad=gradient)
        self.assign_add(m, (gradient - m) * (1.0 - beta_1))
        self.assign_add(v, (ops.square(gradient) - v) * (1.0 - beta_2))
        alpha = lr * ops.sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power)
        self.assign_sub(variable, m * alpha / (ops.sqrt(v) + epsilon))


@keras.saving.register_keras_serializable(package="kbert")
class Adam(AlgorithmOneStep, SummedDenseGradients, keras.optimizers.Adam):
    """Keras' Adam stepping as Algorithm 1 (`AlgorithmOneStep`) from the summed dense gradient
    (`SummedDenseGradients`). Keras' own Adam, on TensorFlow, moves an embedding row that a
    batch reads k times by up to √k times the learning rate."""


@keras.saving.register_keras_serializable(package="kbert")
class AdamW(AlgorithmOneStep, SummedDenseGradients, SavedDecayExclusions,
            keras.optimizers.AdamW):
    """Keras' AdamW stepping as Algorithm 1 from the summed dense gradient, its decay
    exclusions saved with it (`SavedDecayExclusions`)."""
