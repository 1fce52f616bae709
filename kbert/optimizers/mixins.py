"""Mixins that kbert's optimizers (`Adam`, `AdamW`, `Lamb`) put before their Keras base class, each
mending one behaviour of Keras 3's optimizers: the gradient an update sees under replicas and
with embedding lookups (`SummedDenseGradients`), and weight-decay exclusions that a saved
optimizer forgot (`SavedDecayExclusions`).
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
