"""`kill -9` of the CLI at random (seeded) moments: a small slice of `benchmarks/kills.py`
(which runs 20 kills per command and writes benchmarks/results/kills.json)."""

import json
import random

import pytest

from benchmarks import kills


@pytest.fixture(scope="module")
def killed_finetune(tmp_path_factory):
    """(counts, work folder) of one kill of `kbert finetune`: the uninterrupted reference run it
    measures against stays in the folder (`finetune-reference`) for the other kills here."""
    work = tmp_path_factory.mktemp("kills")
    counts = kills.kill_training("finetune", 1, random.Random("a-kill-mid-run"),
                                 work)  # the seed kills 0.43 of an epoch after step 4
    return counts, work


@pytest.mark.slow
def test_killed_runs_finish_with_the_steps_of_an_uninterrupted_run(killed_finetune, tmp_path):
    """One kill of `kbert finetune` and one of `kbert export`; `kbert pretrain`'s kill is
    tests/pretraining/test_pretrain.py::test_resume_after_sigkill (the schedule after it too)."""
    finetune, work = killed_finetune
    assert finetune["kills"] == 1 and finetune["step_mismatches"] == 0
    assert finetune["resumed_runs"] == 1
    assert finetune["leftover_staging"] == 0

    export = kills.kill_export(1, random.Random("test-export"), tmp_path,
                               run_dir=work / "finetune-reference")
    assert export["kills"] == 1
    assert export["incomplete_versions"] == 0
    assert export["leftover_staging_after_next_export"] == 0
    assert export["missing_after_next_export"] == 0


@pytest.mark.slow
def test_a_killed_overwrite_keeps_the_old_run_and_resumes(killed_finetune, tmp_path):
    """`kbert finetune --overwrite` of a finished run killed twice: the old run is whole after
    each kill, and the rerun resumes the new run and swaps it in (benchmarks/kills.py runs 10).
    The finished run is a copy of the other test's reference run."""
    _, work = killed_finetune
    counts = kills.kill_overwrite(2, random.Random("overwrite"), tmp_path,
                                  run_dir=work / "finetune-reference")
    assert counts["kills"] == 2 and counts["old_run_whole"] == 2 and counts["old_run_lost"] == 0
    assert counts["step_mismatches"] == 0 and counts["leftover_staging"] == 0
    assert counts["resumed_replacements"] >= 1


@pytest.mark.slow
def test_finetune_resumes_only_an_unfinished_run(tmp_path, monkeypatch):
    """A run killed while saving its run directory (checkpoint of the last epoch on disk, no
    run.json) resumes with no steps left; a finished run is trained afresh, not resumed."""
    from kbert import outputs
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
    run = tmp_path / "run"
    logs = sorted(p.relative_to(run) for p in (run / "logs").rglob("*") if p.is_file())
    with pytest.raises(FileExistsError, match="holds a finished 'sentiment' run; pass "
                                              "overwrite=True"):
        finetune(**settings)  # a finished run is never replaced by accident
    assert resumed == json.loads((run / "metrics.json").read_text())  # untouched

    (run / "eval_dev").mkdir()  # what `kbert evaluate` wrote, and files of the user's
    (run / "eval_dev" / "metrics.json").write_text("{}")
    (run / "eval_test" / "mine").mkdir(parents=True)
    (run / "notes.txt").write_text("mine")
    (run / "predictions.json").write_text("{}")  # an earlier task's (sentiment has none)
    again = finetune(**settings, overwrite=True)  # trained afresh, the old run removed first
    assert again["resumed_from_step"] is None and again["optimizer_steps"] == 4
    assert not checkpoints.exists()
    assert sorted(p.name for p in run.iterdir()) == [
        ".kbert-output", "eval_test", "logs", "metrics.json", "model.keras", "notes.txt",
        "run.json"]
    assert (run / "eval_test" / "mine").is_dir() and (run / "notes.txt").read_text() == "mine"
    assert not outputs.stage_path(run).exists()
    # TensorBoard shows only the new run: none of the old run's event files are left
    assert logs and not set(logs) & {p.relative_to(run) for p in (run / "logs").rglob("*")}

