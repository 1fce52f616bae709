"""Resumable fine-tuning: what `kbert.training.finetune` adds around `model.fit` so that a
killed `kbert finetune` rerun with the same `--output` goes on from its last checkpoint and
ends with the step count of an uninterrupted run.

Training runs as Keras epochs of `plan.steps_per_epoch` steps (real epochs with `epochs`;
chunks of `CHECKPOINT_EVERY` steps with `steps`), a checkpoint in OUTPUT/checkpoints/ at the
end of each (`kbert.training.checkpoints`: the previous one kept, damaged ones skipped). The
checkpoints go once the run directory is saved. A finished run directory is never resumed or
replaced by accident: `finetune` refuses it unless `overwrite=True` (`kbert finetune
--overwrite`, as Hugging Face's `--overwrite_output_dir`), which trains afresh and first removes
everything of the old run (`RunDirectory.clear`), checkpoints included.
"""

import dataclasses
import math
import shutil

from kbert.atomic import check_directory_target
from kbert.runs import RunDirectory

CHECKPOINTS = "checkpoints"
CHECKPOINT_EVERY = 1000
"""With `steps`, a checkpoint every this many optimizer steps (with `epochs`: every epoch)."""
RESUME_KEYS = ("task", "init", "mode", "total_steps", "steps_per_epoch", "batch_size",
               "sequence_length", "learning_rate", "seed", "max_train_examples")
"""Settings a resumed run must share with its checkpoint: they fix the data and schedule."""


@dataclasses.dataclass(frozen=True)
class FinetunePlan:
    """`total_steps` optimizer steps as `epochs` Keras epochs of `steps_per_epoch`."""

    epochs: int
    steps_per_epoch: int
    total_steps: int


def plan_steps(config, steps_per_pass) -> FinetunePlan:
    """Real epochs of `steps_per_pass` steps, or `config.steps` in chunks of at most
    CHECKPOINT_EVERY (the last one cut at the total by `StopAtStep`)."""
    if config.steps is None:
        return FinetunePlan(config.epochs, steps_per_pass, config.epochs * steps_per_pass)
    every = min(config.steps, CHECKPOINT_EVERY)
    return FinetunePlan(math.ceil(config.steps / every), every, config.steps)


def run_record(config, spec, sequence_length, plan):
    """The settings each checkpoint's state.json records (see RESUME_KEYS)."""
    return {"task": spec.name, "init": str(config.init), "mode": config.mode,
            "total_steps": plan.total_steps, "steps_per_epoch": plan.steps_per_epoch,
            "batch_size": config.batch_size, "sequence_length": sequence_length,
            "learning_rate": config.peak_learning_rate, "seed": config.seed,
            "max_train_examples": config.max_train_examples}


def check_output(output_dir, overwrite):
    """Before any work: `output_dir` must be a directory (or not yet exist), and one that holds
    a finished run is replaced only with `overwrite`."""
    check_directory_target(output_dir, "directory for the run")
    if RunDirectory.is_run(output_dir) and not overwrite:
        raise FileExistsError(
            f"{output_dir} holds a finished {_task_of(output_dir)} run; pass overwrite=True "
            "to train afresh and replace it (its evaluations and logs too), or choose another "
            "output directory.")


def _task_of(output_dir):
    try:
        return repr(RunDirectory(output_dir).info["task"])
    except ValueError:  # a damaged run.json still marks a finished run
        return "kbert"


def resume(output_dir, model, record, plan, overwrite=False):
    """The state of the newest usable checkpoint, restored into `model` (weights and
    optimizer); None for a fresh start: no checkpoint, or `overwrite`, which first removes
    the directory's previous run and checkpoints."""
    from kbert.training.checkpoints import CheckpointError, check_run_state, restore_checkpoint

    checkpoints = output_dir / CHECKPOINTS
    if overwrite:
        RunDirectory(output_dir).clear()
        shutil.rmtree(checkpoints, ignore_errors=True)
        return None

    def validate(state, file):
        try:
            check_run_state(state, file, record, RESUME_KEYS, plan.epochs, plan.total_steps)
        except CheckpointError:
            raise
        except ValueError as error:  # another run's checkpoint
            raise ValueError(f"{error} Or pass overwrite=True to start afresh.") from None

    return restore_checkpoint(checkpoints, model, validate=validate)


def checkpoint_callbacks(output_dir, record, plan):
    """Stop at the plan's step count; save a checkpoint at the end of every Keras epoch."""
    from kbert.training.callbacks import StepCheckpoint, StopAtStep

    return [StopAtStep(plan.total_steps),
            StepCheckpoint(output_dir / CHECKPOINTS, extra_state={"run": record})]


def final_train_loss(history, state):
    """The last epoch's mean training loss: this attempt's, or the checkpoint's when the run
    was resumed after its last epoch (killed while saving the run directory)."""
    losses = history.history.get("loss") if history is not None else None
    if losses:
        return float(losses[-1])
    return (state or {}).get("logs", {}).get("loss")


def step_counts(model, state):
    """metrics.json's `optimizer_steps` (the updates the final weights had) and
    `resumed_from_step` (None for an uninterrupted run)."""
    import keras

    return {"optimizer_steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
            "resumed_from_step": state["step"] if state else None}


def remove_checkpoints(output_dir):
    """Once the run directory is complete, its checkpoints are no longer needed."""
    shutil.rmtree(output_dir / CHECKPOINTS, ignore_errors=True)
