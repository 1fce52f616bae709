"""When kbert's models compile with XLA: one rule, so that `model.compile()` without speed flags
gives the fast path on every backend and device, and users need not know the flag. The
measurements that set it are in `benchmarks/README.md`, "XLA break-even".

- JAX: always. Un-jitted JAX runs op by op, so variable-length batches are padded to a multiple
  of `XLA_PAD_MULTIPLE` (`pad_multiple`): a handful of shapes instead of one per batch.
- TensorFlow, float32, fixed shapes: on, CPUs included (Keras' own "auto" leaves CPUs without
  XLA).
- TensorFlow, batches whose length varies (raw text, and datasets cut to each batch's longest
  row): off, for a task model (`BertTask`), which switches per call of `fit` / `evaluate` /
  `predict` (`xla_by_shape`). XLA compiles once per shape.
- TensorFlow, a call too short to pay for the compilation: off, for a task model, per call
  and per step function (`pays_off`). Compiling costs seconds and saves a share of each step
  that grows with the model, so the break-even is a number of steps times the encoder's
  parameters (embeddings excluded): `XLA_PAYS_AFTER`.
- TensorFlow, bf16 / fp16 compute on a CPU: off. oneDNN runs bf16 matmuls without XLA, and XLA
  on a CPU runs them no faster than float32.
- TensorFlow under a distribution strategy of several replicas: off; Keras 3's compiled train
  step fails there (https://github.com/keras-team/keras/issues/19005).
- Other backends: off.

`jit_compile=True` / `False` given by the user always wins.
"""

import keras

from kbert import tensorflow_backend

XLA_PAD_MULTIPLE = 16
"""Batches that XLA runs are padded to a multiple of this many tokens (at most their length)."""

XLA_PAYS_AFTER = {"train": 1e9, "predict": 5e7}
"""Steps times encoder parameters after which XLA's compilation has paid for itself, for a
training step and for an evaluation or prediction step."""


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
    if tensorflow_backend.replicas_in_sync() > 1:
        return False
    policy = keras.dtype_policies.get(dtype_policy or "float32")
    return policy.compute_dtype == "float32" or tensorflow_backend.has_gpu()


def by_shape(jit_compile, dtype_policy=None):
    """Whether a task model compiled with `jit_compile` decides XLA per input (TensorFlow, left
    to kbert, XLA allowed): compiled for fixed shapes, not for varying ones."""
    return (jit_compile in (None, "auto") and keras.backend.backend() == "tensorflow"
            and default_jit_compile(None, dtype_policy))


def has_fixed_length(x):
    """Whether the batches of `x` (arrays, a dict of them, or a TensorFlow dataset) all have one
    sequence length: arrays do; a dataset does when its spec says so."""
    spec = getattr(x, "element_spec", None)
    if spec is None:
        return True
    first = keras.tree.flatten(spec)[0]
    return first.shape.rank is not None and first.shape[-1] is not None


def pays_off(kind, steps, parameters):
    """Whether compiling `kind`'s step function ("train", "test" or "predict") with XLA pays
    in a call of `steps` steps (None: unknown or endless, so it does) on an encoder of
    `parameters` weights."""
    after = XLA_PAYS_AFTER["train" if kind == "train" else "predict"]
    return steps is None or steps * parameters >= after


def count_batches(x, batch_size=None):
    """Batches in one pass over `x`: a dataset's cardinality, or its arrays' rows over
    `batch_size` (Keras' default 32); None where unknown or endless."""
    if hasattr(x, "cardinality"):
        batches = int(x.cardinality())
        return batches if batches >= 0 else None
    leaves = keras.tree.flatten(x)
    if not leaves or not getattr(leaves[0], "shape", None):
        return None
    return -(-int(leaves[0].shape[0]) // (batch_size or 32))


def pad_multiple(model):
    """The multiple `model`'s variable-length batches are padded to: `XLA_PAD_MULTIPLE` where
    XLA runs them, 1 where they run trimmed without it."""
    if getattr(model, "xla_by_shape", False):
        return 1
    return XLA_PAD_MULTIPLE if getattr(model, "jit_compile", False) else 1


def match_to(model, x, kind, steps=None, batch_size=None):
    """`BertTask.match_xla_to`: under the model's `xla_by_shape`, sets `kind`'s step function
    to XLA when `x` has one fixed length and the call pays for compiling, and drops the built
    function where that changes."""
    if not getattr(model, "xla_by_shape", False):
        return
    if steps is None:
        steps = count_batches(x, batch_size)
    backbone = model.backbone
    encoder = backbone.count_params() - backbone.get_layer("embeddings").count_params()
    wanted = has_fixed_length(x) and pays_off(kind, steps, encoder)
    if model.xla_modes.get(kind) != wanted:
        setattr(model, f"{kind}_function", None)
    model.xla_modes[kind] = model.jit_compile = wanted
