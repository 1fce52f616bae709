"""kbert's workarounds for upstream bugs, all in this module.

Each names its upstream link and the versions it was seen in. `tests/test_compat.py` shows
each bug with the upstream library alone, so it fails on the day upstream fixes it: then the
workaround goes.

| workaround | what upstream does | seen in |
|---|---|---|
| `SummedDenseGradients` | Keras' TensorFlow optimizer squares an embedding gradient's slices before summing repeated rows, and clips each replica's partial gradient | Keras 3.15.1 |
| `SavedDecayExclusions` | Keras keeps `exclude_from_weight_decay` in memory only: a loaded AdamW decays every weight | Keras 3.15.1 |
| `check_jit_compile` | Keras' XLA train step fails under several replicas | Keras 3.15.1, TF 2.21 |
| `patch_keras_for_multi_worker` | Keras' symbolic build and per-replica reduce fail under `MultiWorkerMirroredStrategy` | Keras 3.15.1, TF 2.21 |
| `without_autotune` | destroying a tf.data iterator waits for the autotuning thread's next wake-up, up to a minute | TF 2.21 |

Links:
- Keras' TensorFlow optimizer: https://github.com/keras-team/keras/blob/v3.15.1/keras/src/backend/tensorflow/optimizer.py
- Keras' weight-decay exclusions: https://github.com/keras-team/keras/blob/v3.15.1/keras/src/optimizers/base_optimizer.py
- XLA under replicas: https://github.com/keras-team/keras/issues/19005
- Multi-worker: https://github.com/keras-team/keras/issues/20585
- tf.data's root iterator: https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/core/data/root_dataset.cc

TensorFlow is imported where a function needs it, so the models load without it.
"""

import keras

class SummedDenseGradients:
    """Optimizer mixin (put it first among the bases): on the TensorFlow backend, each update
    uses the gradient summed over replicas, made dense, and clipped after the sum.

    It works around two behaviours of Keras 3's TensorFlow optimizer (seen in Keras 3.15):
      * An embedding lookup's gradient is a `tf.IndexedSlices` whose indices repeat (a segment
        id at every token; under `MirroredStrategy` the all-reduce concatenates the replicas'
        slices, so every position repeats too). Keras' sparse-aware `ops.square` squares each
        slice before duplicates are summed, so Adam's (and LAMB's) second moment gets
        sum(g_i^2) instead of (sum g_i)^2: a first step of up to lr·sqrt(k) for k duplicates,
        and updates that change with the replica count. Global-norm clipping has the same
        error (the norm of the slices, not of the gradient).
      * `BaseOptimizer._backend_apply_gradients` clips before `TFOptimizer._backend_update_step`
        all-reduces, so each replica clips its own partial gradient.
    Here clipping is moved into `_all_reduce_sum_gradients`, after the sum and after
    `tf.convert_to_tensor` has summed duplicate slices. Keras' Adam densifies the gradient in
    its update anyway, so this costs no extra memory. Other backends are left as Keras has them.

    The global norm takes an embedding gradient's square sum from the rows the batch touched
    (`_squared_norm`): the same value as over the whole dense table, read from the touched
    rows only (`benchmarks/README.md`, "Clipping an embedding's gradient").
    """

    def _clip_gradients(self, grads):
        if keras.backend.backend() == "tensorflow":
            return grads  # clipped in _all_reduce_sum_gradients, once summed
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        import tensorflow as tf

        pairs = super()._all_reduce_sum_gradients(grads_and_vars)
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g, _ in pairs]
        if self.global_clipnorm and self.global_clipnorm > 0 and not self.clipnorm:
            squares = [_squared_norm(dense, g.indices) if isinstance(g, tf.IndexedSlices)
                       else tf.reduce_sum(tf.square(dense))
                       for (g, _), dense in zip(pairs, grads) if dense is not None]
            grads = _clip_to_norm(grads, tf.sqrt(tf.add_n(squares)), self.global_clipnorm)
        else:
            grads = super()._clip_gradients(grads)
        return list(zip(grads, (v for _, v in pairs)))


class SavedDecayExclusions:
    """Optimizer mixin: the variables excluded from weight decay are part of the config (their
    paths and the name patterns) and are excluded again when a loaded optimizer is built.

    Keras keeps `exclude_from_weight_decay` in memory only, so a model loaded from a `.keras`
    file went on training with its LayerNorm weights and biases decayed.
    """

    def __init__(self, *args, no_decay_paths=(), no_decay_names=(), **kwargs):
        super().__init__(*args, **kwargs)
        self._no_decay_paths = list(no_decay_paths)
        self._no_decay_names = list(no_decay_names)
        # Given to the constructor (a loaded optimizer): applied in `build`, once the
        # variables with those paths are known.
        self._restore_no_decay = bool(no_decay_paths or no_decay_names)

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        super().exclude_from_weight_decay(var_list=var_list, var_names=var_names)
        self._no_decay_paths = [v.path for v in var_list or ()]
        self._no_decay_names = list(var_names or ())

    def build(self, var_list):
        if self._restore_no_decay and not self.built:
            paths = set(self._no_decay_paths)
            super().exclude_from_weight_decay(
                var_list=[v for v in var_list if v.path in paths],
                var_names=self._no_decay_names)
        super().build(var_list)

    def get_config(self):
        return {**super().get_config(), "no_decay_paths": self._no_decay_paths,
                "no_decay_names": self._no_decay_names}


def _squared_norm(dense, indices):
    """The square sum of `dense`, a gradient that is zero outside the rows `indices` (which may
    repeat): each touched row's square sum, divided by how often its index occurs, summed."""
    import tensorflow as tf

    counts = tf.math.unsorted_segment_sum(tf.ones_like(indices, dense.dtype), indices,
                                          tf.shape(dense, out_type=indices.dtype)[0])
    rows = tf.reshape(tf.gather(dense, indices), (tf.shape(indices)[0], -1))
    return tf.reduce_sum(tf.reduce_sum(tf.square(rows), axis=1) / tf.gather(counts, indices))


def _clip_to_norm(grads, norm, clip_norm):
    """Keras' `clip_by_global_norm` with the norm given: a non-finite norm makes every
    gradient NaN, so that the loss-scale optimizer sees the overflow."""
    scale = clip_norm * keras.ops.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)
    return [g * scale if g is not None else g for g in grads]


def check_jit_compile(strategy, jit_compile):
    """Refuses XLA under a multi-replica strategy: Keras 3's compiled train step then fails
    deep in TensorFlow ("Trying to access resource ... replica_1 ... from device ...",
    keras-team/keras#19005), after the data and model are built. (JAX always compiles.)"""
    import tensorflow as tf

    if jit_compile and isinstance(strategy, tf.distribute.Strategy) and \
            strategy.num_replicas_in_sync > 1:
        raise ValueError(
            f"XLA (jit_compile / --xla) does not work with {strategy.num_replicas_in_sync} "
            f"replicas in Keras 3 (keras-team/keras#19005): train without XLA, or on one device.")


# The multi-worker fix (keras-team/keras#20585): before the first step, Keras 3's TensorFlow
# trainer builds the model symbolically from one batch, and to turn that batch's `PerReplica`
# values into plain tensors it calls `strategy.reduce("MEAN", batch)` on the whole (x, y, w)
# structure. `MirroredStrategy` reduces nests; `MultiWorkerMirroredStrategy`'s collective
# `reduce` converts its argument to one tensor and fails ("Attempt to convert a value
# (PerReplica: ...)"). The patch takes each value's first local replica instead, which has the
# per-replica shape the MEAN gave. Every step then reduces its per-replica results (scalars) with
# `strategy.reduce("MEAN", v, axis=0)`, and a scalar has no axis 0: the patch averages them over
# replicas with `axis=None` (a cross-worker all-reduce, so every worker logs the same numbers).

_PATCHED = False


def patch_keras_for_multi_worker():
    """Installs the multi-worker fix described above (idempotent; the only monkeypatch in
    kbert), as `kbert.training.distribution.get_strategy("multi_worker")` does."""
    global _PATCHED
    if _PATCHED:
        return
    import tensorflow as tf
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


def without_autotune(dataset):
    """`dataset` with tf.data's autotuning thread off, unless its options turn it on.

    Destroying an iterator waits for that thread's next wake-up (TF 2.21: `RootDataset::
    Iterator`'s destructor joins it), and the thread's sleep doubles up to a minute while the
    iterator lives. A `fit` could return seconds after its last step, and an iterator kept
    alive by an error's traceback stalled whichever later call collected it
    (`benchmarks/README.md`, "tf.data's autotuning thread"). Without the thread a map with
    AUTOTUNE parallelism runs on every core. A dataset whose options set `autotune.enabled = True` is left as it is."""
    import tensorflow as tf

    if dataset.options().autotune.enabled is not None:
        return dataset
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
