"""When kbert's models compile with XLA: one rule, so that `model.compile()` without speed flags
gives the fast path on every backend and device, and users need not know the flag.

- JAX: always. Un-jitted JAX runs op by op (two tiny data-parallel pre-training steps took 111 s
  against 30 s jitted).
- TensorFlow, float32: on, CPUs included (Keras' own "auto" leaves CPUs without XLA). On a
  2-core CPU, BERT mini at length 128 trains 1.3x and infers 1.1x faster under XLA than without
  (`benchmarks/results/cpu.json`). XLA compiles once per input shape, so the raw-text path
  pads each batch's length to a multiple of `XLA_PAD_MULTIPLE` (`pad_multiple`): a handful of
  shapes instead of one per batch.
- TensorFlow, bf16 / fp16 compute on a CPU: off. oneDNN runs bf16 matmuls without XLA; XLA on a
  CPU runs them no faster than float32 (README, "Measured").
- TensorFlow under a multi-replica `tf.distribute` strategy: off; Keras 3's compiled train
  step fails there (keras-team/keras#19005).
- Other backends: off.

`jit_compile=True` / `False` given by the user always wins.
"""

import keras

XLA_PAD_MULTIPLE = 16
"""Batches that XLA runs are padded to a multiple of this many tokens (at most their length)."""


def default_jit_compile(jit_compile=None, dtype_policy=None):
    """`jit_compile` as given, or (None or "auto") kbert's choice for this backend and device and
    for a model under `dtype_policy` (a Keras policy or its name; None: float32)."""
    if jit_compile not in (None, "auto"):
        return bool(jit_compile)
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend != "tensorflow":
        return False
    import tensorflow as tf

    if tf.distribute.get_strategy().num_replicas_in_sync > 1:
        return False
    policy = keras.dtype_policies.get(dtype_policy or "float32")
    return policy.compute_dtype == "float32" or bool(tf.config.list_logical_devices("GPU"))


def pad_multiple(model):
    """The multiple a compiled `model`'s raw-text batches are padded to: 1 without XLA."""
    return XLA_PAD_MULTIPLE if getattr(model, "jit_compile", False) else 1
