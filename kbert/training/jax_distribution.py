"""Data and model parallelism on Keras 3's JAX backend, through `keras.distribution`.

`get_jax_strategy(name)` (what `kbert.training.distribution.get_strategy` returns on JAX):
  * None / "default": no distribution (one device);
  * "data_parallel": `keras.distribution.DataParallel` over every device: weights replicated,
    each global batch split along a "batch" mesh axis, gradients all-reduced by XLA;
  * "model_parallel" or "model_parallel:N": `ModelParallel` on a ("batch", "model") mesh of
    devices/N × N (N = 2 by default), with `bert_layout_map`: the big kernels split Megatron-
    style over "model" (q/k/v and intermediate by columns, attention output and output by rows,
    the token embedding by its hidden axis, as 30,522 rows divide by neither 4 nor 8), data over
    "batch". The fused q/k/v kernel splits as stored ([q | k | v] columns, not per head), so
    XLA moves activations between devices for attention: a layout for fitting a model in
    memory, not yet a tuned one;
  * "auto": data_parallel when there is more than one device, the default otherwise.

Keras reads its distribution from a process-wide setting when it creates variables *and* in
every `fit`/`evaluate` step (to shard each batch), so a run holds `JaxStrategy.scope()` from
building the model to its last evaluation (`run_scope`). With the distribution set, Keras'
JAX trainer splits each tf.data batch itself: the global batch must divide by the "batch" axis.
"""

import contextlib

import keras

JAX_STRATEGIES = ("default", "data_parallel", "model_parallel", "auto")
DEFAULT_MODEL_AXIS = 2

# Variable-path patterns (`re.fullmatch`, so an optional prefix such as a wrapping model's name
# is allowed) → which kernel axis the "model" mesh axis splits.
_SPLIT_COLUMNS = (r"transformer_layer_\d+/attention_qkv/kernel",
                  r"transformer_layer_\d+/intermediate/kernel",
                  r"embeddings/token_embedding/embeddings")
_SPLIT_ROWS = (r"transformer_layer_\d+/attention_output/kernel",
               r"transformer_layer_\d+/output/kernel")


class JaxStrategy:
    """What `pretrain()` asks of a `tf.distribute.Strategy` (`scope`, `num_replicas_in_sync`),
    for a `keras.distribution.Distribution` or None (one device)."""

    def __init__(self, distribution=None):
        self.distribution = distribution

    @property
    def num_replicas_in_sync(self):
        return self.distribution.num_model_replicas if self.distribution else 1

    def scope(self):
        return self.distribution.scope() if self.distribution else contextlib.nullcontext()

    def __repr__(self):
        return f"JaxStrategy({self.distribution!r})"


def get_jax_strategy(name=None, devices=None):
    """The `JaxStrategy` called `name` (module docstring), over `devices` (default: all)."""
    if isinstance(name, JaxStrategy):
        return name
    name = (name or "default").lower().replace("-", "_")
    devices = list(devices or keras.distribution.list_devices())
    if name == "auto":
        name = "data_parallel" if len(devices) > 1 else "default"
    if name == "default":
        return JaxStrategy(None)
    if name == "data_parallel":
        return JaxStrategy(keras.distribution.DataParallel(devices=devices))
    if name == "model_parallel" or name.startswith("model_parallel:"):
        size = _model_axis_size(name, len(devices))
        mesh = keras.distribution.DeviceMesh((len(devices) // size, size), ("batch", "model"),
                                             devices)
        return JaxStrategy(keras.distribution.ModelParallel(
            layout_map=bert_layout_map(mesh), batch_dim_name="batch"))
    raise ValueError(f"Unknown strategy {name!r} on the JAX backend; choose one of "
                     f"{', '.join(JAX_STRATEGIES)}, or model_parallel:N.")


def _model_axis_size(name, n_devices):
    text = name.split(":", 1)[1] if ":" in name else str(DEFAULT_MODEL_AXIS)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"model_parallel:N needs a positive integer N, got {name!r}.")
    size = int(text)
    if n_devices % size:
        raise ValueError(f"{name}: a model axis of {size} does not divide the {n_devices} "
                         f"device(s).")
    return size


def bert_layout_map(device_mesh):
    """The `LayoutMap` of `ModelParallel` for kbert's BERT (module docstring); every other
    variable, and the optimizer's slots of unlisted ones, is replicated."""
    layout = keras.distribution.LayoutMap(device_mesh)
    for pattern in _SPLIT_COLUMNS:
        layout[f"(.*/)?{pattern}"] = (None, "model")
    for pattern in _SPLIT_ROWS:
        layout[f"(.*/)?{pattern}"] = ("model", None)
    return layout


def check_jax_run(strategy, batch_size, config):
    """One-line errors, before any work, for what Keras' JAX trainer needs of a distributed
    run: a global batch that splits evenly over the "batch" axis, and a "model" axis that
    divides the kernels it splits. A `tf.distribute` strategy passes unchecked."""
    if not isinstance(strategy, JaxStrategy) or strategy.distribution is None:
        return
    replicas = strategy.num_replicas_in_sync
    if batch_size % replicas:
        raise ValueError(f"batch_size {batch_size} does not split over {replicas} data-"
                         f"parallel replicas; use a multiple of {replicas}.")
    mesh = strategy.distribution.device_mesh
    if "model" in mesh.axis_names:
        size = mesh.shape[mesh.axis_names.index("model")]
        if config.hidden_size % size or config.intermediate_size % size:
            raise ValueError(f"A model axis of {size} devices does not divide hidden_size "
                             f"{config.hidden_size} and intermediate_size "
                             f"{config.intermediate_size}; choose model_parallel:N with N "
                             f"dividing both.")


def run_scope(strategy):
    """The context a whole run (build, fit, evaluate) holds: the distribution's scope on JAX,
    nothing for a `tf.distribute` strategy (entered where variables are made)."""
    return strategy.scope() if isinstance(strategy, JaxStrategy) else contextlib.nullcontext()
