"""Keras callbacks for long training runs: atomic checkpoints that resume exactly, an exact step
budget, and per-step TensorBoard scalars.

Resuming works with `model.fit`'s epochs: `pretrain` makes one "epoch" of `checkpoint_every`
steps, `StepCheckpoint` saves at every epoch end (the weights, the optimizer's variables —
moments, iteration count, hence the learning-rate schedule's position — and the step), as a
new checkpoint directory that appears whole or not at all, keeping the previous one
(`kbert.training.checkpoints`). After a crash, `restore_checkpoint` loads the newest usable one
and `fit(initial_epoch=state["epoch"])` goes on, so a resumed run takes the same number of
optimizer steps on the same schedule as an uninterrupted one.
"""

import os
import pathlib
import time

import keras

from kbert.training.checkpoints import (STATE, WEIGHTS, CheckpointError,  # noqa: F401
                                        restore_checkpoint, save_checkpoint)


def _optimizer_step(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


class StepCheckpoint(keras.callbacks.Callback):
    """Saves `directory/step-N/` atomically at every epoch end, keeping the previous one
    (see module docstring).

    `extra_state` (a dict or a zero-argument function returning one) is stored in state.json
    too. Under a multi-worker strategy every worker must call `save_weights` (it is a
    collective); only the chief (`is_chief`) keeps what it wrote.
    """

    def __init__(self, directory, extra_state=None, is_chief=True):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.extra_state = extra_state
        self.is_chief = is_chief

    def on_epoch_end(self, epoch, logs=None):
        self.save(epoch + 1, logs)

    def save(self, epoch, logs=None):
        state = {"epoch": int(epoch), "step": _optimizer_step(self.model), "time": time.time()}
        # The epoch's training metrics, for a run resumed after its last epoch.
        state["logs"] = {k: float(v) for k, v in (logs or {}).items()
                         if isinstance(v, (int, float)) or getattr(v, "shape", None) == ()}
        extra = self.extra_state() if callable(self.extra_state) else self.extra_state
        state.update(extra or {})
        if not self.is_chief:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                self.model.save_weights(os.path.join(tmp, WEIGHTS))
            return
        save_checkpoint(self.directory, self.model, state)


class StopAtStep(keras.callbacks.Callback):
    """Stops training once the optimizer has taken `total_steps` updates (so the last epoch
    may be cut short)."""

    def __init__(self, total_steps):
        super().__init__()
        self.total_steps = int(total_steps)

    def on_train_batch_end(self, batch, logs=None):
        if _optimizer_step(self.model) >= self.total_steps:
            self.model.stop_training = True


def learning_rate_used(optimizer):
    """The rate of the optimizer's last update (the first one's before any).

    `optimizer.learning_rate` evaluates a schedule at Keras' batch counter now, which after an
    update is the next update's. Under gradient accumulation of k batches that counter runs k
    per update and update u (from 0) applies at batch k·u + k - 1: after u updates, the last
    one's rate is the schedule at batch k·u - 1."""
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # under loss scaling
    schedule = optimizer._learning_rate
    if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        batches = optimizer.gradient_accumulation_steps or 1
        batch = keras.ops.maximum(optimizer.iterations * batches - 1, 0)
        return float(keras.ops.convert_to_numpy(schedule(batch)))
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


class LearningRateLog(keras.callbacks.Callback):
    """`batch_learning_rate` in TensorBoard every `every` steps, keyed by the optimizer step:
    the rate that step used (Keras' own `epoch_learning_rate` is the schedule's value after an
    epoch's last step, 0 at the end of a linear decay)."""

    def __init__(self, log_dir, every=1):
        super().__init__()
        self.log_dir, self.every = str(log_dir), max(1, int(every))
        self._writer = None

    def on_train_begin(self, logs=None):
        import tensorflow as tf

        self._writer = tf.summary.create_file_writer(self.log_dir)

    def on_train_batch_end(self, batch, logs=None):
        import tensorflow as tf

        step = _optimizer_step(self.model)
        if step % self.every and step != 1:
            return
        with self._writer.as_default(step=step):
            tf.summary.scalar("batch_learning_rate", learning_rate_used(self.model.optimizer))

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()


class StepLogger(keras.callbacks.Callback):
    """Per-step TensorBoard scalars in `log_dir`, keyed by the optimizer step (so a resumed run
    continues its curves): every metric in fit's logs (`loss`, `mlm_loss`, `mlm_accuracy`,
    `nsp_loss`, `nsp_accuracy`: running means over the current epoch, as Keras reports them),
    `learning_rate` (the rate the step used) and `sequences_per_second` (examples
    per second of wall time since the previous write). Writes every `every` batches.
    """

    def __init__(self, log_dir, batch_size, every=10, enabled=True):
        super().__init__()
        self.log_dir = str(log_dir)
        self.batch_size = int(batch_size)
        self.every = max(1, int(every))
        self.enabled = enabled
        self._writer = None
        self.history = []

    def on_train_begin(self, logs=None):
        import tensorflow as tf

        if self.enabled:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        self._last_time, self._batches = time.perf_counter(), 0

    def on_train_batch_end(self, batch, logs=None):
        import tensorflow as tf

        self._batches += 1
        if self._batches % self.every:
            return
        now = time.perf_counter()
        speed = self.every * self.batch_size / max(now - self._last_time, 1e-9)
        self._last_time = now
        step = _optimizer_step(self.model)
        learning_rate = learning_rate_used(self.model.optimizer)
        values = {k: float(v) for k, v in (logs or {}).items()}
        values.update(learning_rate=learning_rate, sequences_per_second=speed)
        self.history.append({"step": step, **values})
        if self._writer is not None:
            with self._writer.as_default(step=step):
                for name, value in values.items():
                    tf.summary.scalar(name, value)
            self._writer.flush()

    def on_epoch_begin(self, epoch, logs=None):
        self._last_time = time.perf_counter()
        self._batches = 0

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
