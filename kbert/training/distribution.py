"""Choosing a `tf.distribute` strategy, and making Keras 3's `fit` work under multi-worker.

`get_strategy(name)`:
  * None / "default": `tf.distribute.get_strategy()` (one device, no distribution);
  * "mirrored": `MirroredStrategy` over the local GPUs (or the logical CPUs configured with
    `tf.config.set_logical_device_configuration`);
  * "multi_worker": `MultiWorkerMirroredStrategy`, the cluster read from `TF_CONFIG`;
  * "tpu" or "tpu:NAME": `TPUStrategy` from a `TPUClusterResolver` (NAME, or the environment's);
  * "auto": multi_worker when `TF_CONFIG` names more than one worker, TPU when a resolver finds
    one, mirrored when several GPUs are visible, the default otherwise.
On Keras' JAX backend the names are those of `kbert.training.jax_distribution` ("data_parallel",
"model_parallel[:N]", "auto", "default"); a name of the other backend is a one-line error.

The multi-worker fix (keras-team/keras#20585): before the first step, Keras 3's TensorFlow
trainer builds the model symbolically from one batch, and to turn that batch's `PerReplica`
values into plain tensors it calls `strategy.reduce("MEAN", batch)` on the whole (x, y, w)
structure. `MirroredStrategy` reduces nests; `MultiWorkerMirroredStrategy`'s collective
`reduce` converts its argument to one tensor and fails ("Attempt to convert a value
(PerReplica: ...)"), and it would also be a cross-worker collective for what only needs shapes.
`patch_keras_for_multi_worker` (applied by `get_strategy("multi_worker")`, idempotent, and the
only monkeypatch in kbert) replaces that step with taking each value's first local replica, which
has the per-replica shape the MEAN gave. Then every step reduces its per-replica results (the
loss and metric values, scalars) with `strategy.reduce("MEAN", v, axis=0)` in the multi-worker
branch of `reduce_per_replica`; a scalar has no axis 0 and tracing fails. The patch averages
them over replicas with `axis=None` (a cross-worker all-reduce, so every worker logs the same
numbers). Everything else in `fit`/`evaluate` is Keras' own.
"""

import json
import os

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu", "auto")
TF_ONLY = ("mirrored", "multi_worker", "multiworker", "multi_worker_mirrored", "tpu")


def _tf_config_workers():
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    except json.JSONDecodeError:
        return 0
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def get_strategy(name=None):
    """The `tf.distribute.Strategy` called `name` (module docstring); on Keras' JAX backend,
    the `keras.distribution` one of `kbert.training.jax_distribution`. The one place where the
    choice is made by backend."""
    import keras

    from kbert.training import jax_distribution

    backend = keras.backend.backend()
    if isinstance(name, (tf.distribute.Strategy, jax_distribution.JaxStrategy)):
        if isinstance(name, jax_distribution.JaxStrategy) != (backend == "jax"):
            raise ValueError(f"A {type(name).__name__} does not run on Keras' {backend} "
                             f"backend.")
        return name
    name = (name or "default").lower().replace("-", "_")
    if backend == "jax":
        if name in TF_ONLY or name.startswith("tpu:"):
            raise ValueError(f"Strategy {name!r} is for the TensorFlow backend; on JAX choose "
                             f"one of {', '.join(jax_distribution.JAX_STRATEGIES)}.")
        return jax_distribution.get_jax_strategy(name)
    if name.startswith(("data_parallel", "model_parallel")):
        raise ValueError(f"Strategy {name!r} runs on Keras' JAX backend (KERAS_BACKEND=jax); "
                         f"on TensorFlow choose one of {', '.join(STRATEGIES)}.")
    if name == "auto":
        if _tf_config_workers() > 1:
            name = "multi_worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            try:
                return get_strategy("tpu")
            except (ValueError, RuntimeError, tf.errors.NotFoundError):
                name = "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name in ("multi_worker", "multiworker", "multi_worker_mirrored"):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        patch_keras_for_multi_worker()
        return strategy
    if name == "tpu" or name.startswith("tpu:"):
        tpu = name.split(":", 1)[1] if ":" in name else None
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}.")


def check_jit_compile(strategy, jit_compile):
    """Refuses XLA under a multi-replica strategy: Keras 3's compiled train step then fails
    deep in TensorFlow ("Trying to access resource ... replica_1 ... from device ...",
    keras-team/keras#19005), after the data and model are built. (JAX always compiles.)"""
    if jit_compile and isinstance(strategy, tf.distribute.Strategy) and \
            strategy.num_replicas_in_sync > 1:
        raise ValueError(
            f"XLA (jit_compile / --xla) does not work with {strategy.num_replicas_in_sync} "
            f"replicas in Keras 3 (keras-team/keras#19005): train without XLA, or on one device.")


def is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or (
        isinstance(strategy, tf.distribute.Strategy)
        and getattr(strategy.extended, "_in_multi_worker_mode", lambda: False)())


def is_chief(strategy=None):
    """Whether this process writes shared outputs (metrics, logs, checkpoints)."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    task = config.get("task", {})
    if not task or strategy is not None and not is_multi_worker(strategy):
        return True
    if "chief" in config.get("cluster", {}):
        return task.get("type") == "chief"
    return task.get("type") == "worker" and int(task.get("index", 0)) == 0


_PATCHED = False


def patch_keras_for_multi_worker():
    """Installs the fix described in the module docstring (idempotent)."""
    global _PATCHED
    if _PATCHED:
        return
    from keras.src import tree
    from keras.src.backend.tensorflow import trainer as tf_trainer

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if self._distribute_strategy is None:
            return
        if iterator is not None:
            for _, _, it in iterator:
                batch = next(it)
                local = self.distribute_strategy.experimental_local_results

                def first_replica(value):
                    if isinstance(value, tf.distribute.DistributedValues):
                        return local(value)[0]
                    return value

                data_batch = tree.map_structure(first_replica, batch)
                break
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    original_reduce = tf_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and tf_trainer._collective_all_reduce_multi_worker(
                strategy):
            return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return original_reduce(values, strategy, reduction)

    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    tf_trainer.reduce_per_replica = reduce_per_replica
    _PATCHED = True
