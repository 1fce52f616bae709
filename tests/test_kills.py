"""`kill -9` of the CLI at random (seeded) moments: a small slice of `benchmarks/kills.py`
(which runs 20 kills per command and writes benchmarks/results/kills.json)."""

import random

import pytest

from benchmarks import kills


@pytest.mark.slow
def test_killed_runs_finish_with_the_steps_of_an_uninterrupted_run(tmp_path):
    """One kill of `kbert finetune` and one of `kbert export`; `kbert pretrain`'s kill is
    tests/pretraining/test_pretrain.py::test_resume_after_sigkill (the schedule after it too)."""
    finetune = kills.kill_training("finetune", 1, random.Random("a-kill-mid-run"),
                                   tmp_path)  # the seed kills 0.43 of an epoch after step 4
    assert finetune["kills"] == 1 and finetune["step_mismatches"] == 0
    assert finetune["resumed_runs"] == 1
    assert finetune["leftover_staging"] == 0

    export = kills.kill_export(1, random.Random("test-export"), tmp_path,
                               run_dir=tmp_path / "finetune-reference")
    assert export["kills"] == 1
    assert export["incomplete_versions"] == 0
    assert export["leftover_staging_after_next_export"] == 0
    assert export["missing_after_next_export"] == 0


@pytest.mark.slow
def test_finetune_resumes_only_an_unfinished_run(tmp_path, monkeypatch):
    """A run killed while saving its run directory (checkpoint of the last epoch on disk, no
    run.json) resumes with no steps left; a finished run is trained afresh, not resumed."""
    from kbert.runs import INFO_FILE
    from kbert.training import finetune_checkpoints
    from kbert.training.finetune import finetune

    settings = dict(task="sentiment", init="tiny", output_dir=str(tmp_path / "run"), epochs=2,
                    batch_size=8, max_train_examples=16, max_eval_examples=8,
                    sequence_length=16, verbose=0)
    monkeypatch.setattr(finetune_checkpoints, "remove_checkpoints", lambda output_dir: None)
    first = finetune(**settings)
    assert first["optimizer_steps"] == 4 and first["resumed_from_step"] is None
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "latest", "step-000000002", "step-000000004"]

    (tmp_path / "run" / INFO_FILE).unlink()  # killed inside RunDirectory.save
    resumed = finetune(**settings)
    assert resumed["optimizer_steps"] == 4 and resumed["resumed_from_step"] == 4
    assert resumed["final_train_loss"] == first["final_train_loss"]
    assert resumed["accuracy"] == first["accuracy"]  # the same weights, evaluated again

    monkeypatch.undo()
    again = finetune(**settings)  # a finished run: trained afresh, checkpoints removed
    assert again["resumed_from_step"] is None and again["optimizer_steps"] == 4
    assert not checkpoints.exists()

