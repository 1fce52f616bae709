"""Resumable pre-training: the step plan and the run record that `kbert.training.pretrain`
checks a checkpoint against, so that rerunning a killed `pretrain()` with the same settings goes
on from its newest usable checkpoint and ends at the step count of an uninterrupted run.

Training runs as Keras epochs of `checkpoint_every` optimizer steps, a checkpoint in
OUTPUT/checkpoints/step-N/ at the end of each (`kbert.training.checkpoints`: written atomically,
the previous one kept, damaged ones skipped).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """`total_steps` optimizer updates, run as `epochs` Keras epochs of `checkpoint_every`
    updates each (a checkpoint ends every epoch)."""

    total_steps: int
    checkpoint_every: int
    epochs: int


def plan_steps(config, train_examples) -> StepPlan:
    """Steps from `steps`, or from `epochs` passes over the training pairs."""
    steps = config.steps
    if steps is None:
        steps_per_pass = train_examples // (config.batch_size * config.accumulation)
        if steps_per_pass < 1:
            raise ValueError(f"One pass over the corpus makes {train_examples} pairs, fewer "
                             f"than one step of {config.batch_size * config.accumulation}.")
        steps = config.epochs * steps_per_pass
    total = int(steps)
    every = max(1, min(int(config.checkpoint_every or total), total))
    return StepPlan(total, every, -(-total // every))


def run_record(config, model, source, plan):
    """The settings metrics.json and every checkpoint's state.json record."""
    init = config.init
    return {"preset": None if init or config.bert_config else config.preset,
            "init": str(init) if init else None, "corpus": source,
            "total_steps": plan.total_steps, "batch_size": config.batch_size,
            "sequence_length": config.sequence_length,
            "gradient_accumulation_steps": config.accumulation,
            "learning_rate": config.learning_rate, "optimizer": config.optimizer,
            "nsp": config.nsp, "whole_word": config.whole_word,
            "max_predictions": config.predictions, "mixed_precision": config.policy,
            "jit_compile": bool(model.jit_compile), "checkpoint_every": plan.checkpoint_every,
            "seed": config.seed, "causal": config.causal}


RESUME_KEYS = ("total_steps", "batch_size", "sequence_length", "checkpoint_every",
               "gradient_accumulation_steps")
"""Settings a resumed run must share with its checkpoint: they fix the step schedule."""


def resume(output, model, run, chief=True):
    """(state, initial_epoch): the newest usable checkpoint restored into `model`, or (None, 0).

    A damaged checkpoint falls back to the previous one with a warning; one whose state does
    not fit this run (another run's settings, an epoch or step past this run's end) is an
    error that names its state.json.
    """
    from kbert.training.checkpoints import check_run_state, restore_checkpoint

    def validate(state, file):
        check_run_state(state, file, run, RESUME_KEYS,
                        epochs=-(-run["total_steps"] // run["checkpoint_every"]),
                        total_steps=run["total_steps"])

    state = restore_checkpoint(output / "checkpoints", model, validate=validate, clean=chief)
    if state is None:
        return None, 0
    return state, int(state["epoch"])
