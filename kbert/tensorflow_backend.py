"""What kbert does only on Keras' TensorFlow backend, in one place, so that the layers and models
that call it are written in `keras.ops` alone. Each function imports TensorFlow when called."""

import functools


def replicas_in_sync():
    """Replicas of the `tf.distribute` strategy in scope (1 outside any)."""
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


def has_gpu():
    """Whether TensorFlow sees a GPU."""
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))


def outside_distribution(model):
    """Whether `model` was built, and is called now, outside any `tf.distribute` scope."""
    import tensorflow as tf

    return (not tf.distribute.has_strategy()
            and model.distribute_strategy is tf.distribute.get_strategy())


@functools.cache
def compiled_linear(fn):
    """`fn(x, *rest)`, linear in `x`, compiled by XLA into one pass over `x`, with a gradient
    that is `fn` of the incoming gradient: the backward pass recomputes what it needs (for
    dropout, the mask from its seed and shape) rather than keeping it.

    Dropout (`kbert.layers.dropout`) runs this where TensorFlow runs a step without XLA (kbert's
    default for batches of varying length): there its hash-based mask is otherwise ~23
    kernels, each a pass over the tensor (`benchmarks/README.md`, "Dropout outside XLA").
    Inside an XLA step the function is inlined and fuses as before."""
    import tensorflow as tf

    compiled = tf.function(fn, jit_compile=True)

    @tf.custom_gradient
    def linear(x, *rest):
        def gradient(upstream):
            return (compiled(upstream, *rest),) + (None,) * len(rest)

        return compiled(x, *rest), gradient

    return linear
