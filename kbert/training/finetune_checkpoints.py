"""Resumable fine-tuning: what `kbert.training.finetune` adds around `model.fit` so that a
killed `kbert finetune` rerun with the same `--output` goes on from its last checkpoint and
ends with the step count of an uninterrupted run.

Training runs as Keras epochs of `plan.steps_per_epoch` steps (real epochs with `epochs`;
chunks of `CHECKPOINT_EVERY` steps with `steps`), a checkpoint in OUTPUT/checkpoints/ at the
end of each (`kbert.training.checkpoints`: the previous one kept, damaged ones skipped). The
checkpoints go once the run directory is saved. A finished run directory is never resumed or
replaced by accident: `finetune` refuses it unless `overwrite=True` (`kbert finetune
--overwrite`, as Hugging Face's `--overwrite_output_dir`), which trains afresh in a staging
folder beside it and swaps the new run in once complete (`kbert.outputs`): the old run stays
whole until then, and the user's own files in it stay after.
"""

import dataclasses
import math
import pathlib
import shutil

from kbert import outputs
from kbert.runs import INFO_FILE, LOGS, METRICS_FILE, MODEL_FILE, PREDICTIONS_FILE, RunDirectory
from kbert.training.best_epoch import BEST

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


RUN_NAMES = (MODEL_FILE, INFO_FILE, METRICS_FILE, PREDICTIONS_FILE, LOGS, CHECKPOINTS, BEST,
             "eval_*")
"""What a run writes in its folder: the only names whose links `working_folder` removes."""


def working_folder(output_dir, overwrite, inputs=()):
    """Where `finetune` writes, checked before any work: `output_dir` itself (new, or an
    unfinished run to resume), or with `overwrite` of an existing folder its staging beside it
    (`kbert.outputs.stage_path`). A finished run is replaced only with `overwrite`.

    Args:
      output_dir: the run's folder.
      overwrite: replace what is there once the new run is complete.
      inputs: what the run reads (its init checkpoint, its data folder).

    Returns:
      The folder to train in.
    """
    output_dir = pathlib.Path(output_dir)
    status = outputs.check_output(output_dir, "finetune", overwrite, inputs,
                                  unmarked=RunDirectory.is_run)
    if status == "same" and not overwrite and RunDirectory.is_run(output_dir):
        raise FileExistsError(
            f"{output_dir} holds a finished {_task_of(output_dir)} run; pass overwrite=True "
            "to train afresh and replace it (its evaluations and logs too), or choose another "
            "output directory.")
    return outputs.working_folder(output_dir, "finetune", status, overwrite, RUN_NAMES)


def owned_by_run(entry):
    """Whether a run wrote `entry` (replaced by a new run; anything else of the user's stays):
    its files, logs, checkpoints, and `kbert evaluate` scores with nothing else inside."""
    entry = pathlib.Path(entry)
    if entry.name.startswith("eval_") and entry.is_dir() and not entry.is_symlink():
        return {p.name for p in entry.iterdir()} <= {METRICS_FILE, PREDICTIONS_FILE}
    return entry.name in RUN_NAMES or entry.name.startswith(f".{MODEL_FILE}.") or (
        entry.name.startswith(".") and entry.name.endswith(".json.tmp"))


def swap_in(staging, output_dir):
    """Puts the complete new run in `staging` in place of `output_dir`, keeping the user's own
    files (`owned_by_run`)."""
    outputs.swap_in(staging, output_dir, owned_by_run)


def _task_of(output_dir):
    try:
        return repr(RunDirectory(output_dir).info["task"])
    except ValueError:  # a damaged run.json still marks a finished run
        return "kbert"


def resume(output_dir, model, record, plan, restart_on_mismatch=False):
    """The state of the newest usable checkpoint, restored into `model` (weights and
    optimizer); None for a fresh start (no checkpoint). A checkpoint of other settings is an
    error, or with `restart_on_mismatch` (a replacement's staging) removed."""
    from kbert.training.checkpoints import CheckpointError, check_run_state, restore_checkpoint

    checkpoints = output_dir / CHECKPOINTS

    def validate(state, file):
        try:
            check_run_state(state, file, record, RESUME_KEYS, plan.epochs, plan.total_steps)
        except CheckpointError:
            raise
        except ValueError as error:  # another run's checkpoint
            raise ValueError(f"{error} Or pass overwrite=True to start afresh.") from None

    try:
        return restore_checkpoint(checkpoints, model, validate=validate)
    except CheckpointError:
        raise
    except ValueError:
        if not restart_on_mismatch:
            raise
        shutil.rmtree(checkpoints, ignore_errors=True)
        return None


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
