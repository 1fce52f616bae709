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

Under multi-worker, `get_strategy` installs `kbert.compat.patch_keras_for_multi_worker`; XLA under
several replicas is refused by `kbert.compat.check_jit_compile`.
"""

import json
import os

import tensorflow as tf

from kbert.compat import patch_keras_for_multi_worker

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
