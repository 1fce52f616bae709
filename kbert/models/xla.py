"""When kbert's models compile with XLA: one rule, so that `model.compile()` without speed flags
gives the fast path on every backend and device, and users need not know the flag.

- JAX: always. Un-jitted JAX runs op by op (two tiny data-parallel pre-training steps took 111 s
  against 30 s jitted), so variable-length batches are padded to a multiple of
  `XLA_PAD_MULTIPLE` (`pad_multiple`): a handful of shapes instead of one per batch.
- TensorFlow, float32, fixed shapes: on, CPUs included (Keras' own "auto" leaves CPUs without
  XLA). On a 2-core CPU, BERT mini at length 128, batch 16, trains 1.13x and infers 1.41x
  faster under XLA than without (`benchmarks/results/cpu-default-mini.json`).
- TensorFlow, batches whose length varies (raw text, and datasets cut to each batch's longest
  row): off, for a task model (`BertTask`), which switches per call of `fit` / `evaluate` /
  `predict` (`xla_by_shape`). XLA compiles once per shape: in the harness's first run,
  fine-tuning on movie reviews ran at 57 sequences/s under XLA (lengths padded to multiples of
  16) against 75.5 trimmed without.
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


def by_shape(jit_compile, dtype_policy=None):
    """Whether a task model compiled with `jit_compile` decides XLA per input (TensorFlow, left
    to kbert, XLA allowed): compiled for fixed shapes, not for varying ones."""
    return (jit_compile in (None, "auto") and keras.backend.backend() == "tensorflow"
            and default_jit_compile(None, dtype_policy))


def has_fixed_length(x):
    """Whether the batches of `x` (arrays, a dict of them, or a tf.data dataset) all have one
    sequence length: arrays do; a dataset does when its spec says so."""
    spec = getattr(x, "element_spec", None)
    if spec is None:
        return True
    first = keras.tree.flatten(spec)[0]
    return first.shape.rank is not None and first.shape[-1] is not None


def pad_multiple(model):
    """The multiple `model`'s variable-length batches are padded to: `XLA_PAD_MULTIPLE` where
    XLA runs them, 1 where they run trimmed without it."""
    if getattr(model, "xla_by_shape", False):
        return 1
    return XLA_PAD_MULTIPLE if getattr(model, "jit_compile", False) else 1
