"""Checkpoints that survive kills and damaged files (`kbert.training.checkpoints`): each test
makes a state a killed or damaged run leaves on disk and checks what resuming does."""

import json
import os
import shutil
import warnings

import keras
import numpy as np
import pytest

from kbert.training.checkpoints import (STATE, WEIGHTS, CheckpointError, CheckpointWarning,
                                        check_run_state, list_checkpoints, restore_checkpoint,
                                        save_checkpoint)

DEAD_PID = 4_000_000  # above Linux's pid_max: no such process


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _save_steps(directory, steps, keep=2):
    """Saves one checkpoint per step (a distinct model each) and returns their kernels."""
    kernels = {}
    for step in steps:
        model = _model(seed=step)
        save_checkpoint(directory, model, {"epoch": step // 20, "step": step}, keep=keep)
        kernels[step] = model.layers[0].kernel.numpy()
    return kernels


def _restored(directory, validate=None):
    model = _model(seed=99)
    state = restore_checkpoint(directory, model, validate=validate)
    return state, model.layers[0].kernel.numpy()


def test_new_name_per_checkpoint_keeps_the_previous_one(tmp_path):
    kernels = _save_steps(tmp_path, [20, 40, 60])
    assert sorted(os.listdir(tmp_path)) == ["latest", "step-000000040", "step-000000060"]
    assert os.readlink(tmp_path / "latest") == "step-000000060"
    assert json.loads((tmp_path / "latest" / STATE).read_text())["step"] == 60
    state, kernel = _restored(tmp_path)
    assert state["step"] == 60
    np.testing.assert_array_equal(kernel, kernels[60])


@pytest.mark.parametrize("damage", ["truncated", "empty", "random", "missing_state",
                                    "invalid_json", "not_an_object", "epoch_999"])
def test_a_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path, damage):
    kernels = _save_steps(tmp_path, [40, 60])
    newest = tmp_path / "step-000000060"
    data = (newest / WEIGHTS).read_bytes()
    if damage == "truncated":
        (newest / WEIGHTS).write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        (newest / WEIGHTS).write_bytes(b"")
    elif damage == "random":
        (newest / WEIGHTS).write_bytes(np.random.default_rng(0).bytes(len(data)))
    elif damage == "missing_state":
        (newest / STATE).unlink()
    elif damage == "invalid_json":
        (newest / STATE).write_text('{"epoch": 3, "step": ')
    elif damage == "not_an_object":
        (newest / STATE).write_text("[]")
    else:
        (newest / STATE).write_text(json.dumps({"epoch": 999, "step": 60}))

    def validate(state, file):
        check_run_state(state, file, {}, (), epochs=10, total_steps=200)

    with pytest.warns(CheckpointWarning, match="step-000000060") as caught:
        state, kernel = _restored(tmp_path, validate)
    assert state["step"] == 40
    np.testing.assert_array_equal(kernel, kernels[40])
    assert all("Traceback" not in str(w.message) for w in caught)

    # the run goes on from 40: its next checkpoint replaces the stale, damaged 60
    _save_steps(tmp_path, [60])
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000000060", "step-000000040"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _restored(tmp_path, validate)[0]["step"] == 60


def test_no_usable_checkpoint_is_an_error_naming_each_file(tmp_path):
    _save_steps(tmp_path, [40, 60])
    (tmp_path / "step-000000060" / WEIGHTS).write_bytes(b"\0" * 100)
    (tmp_path / "step-000000040" / STATE).write_text("{")
    with pytest.warns(CheckpointWarning), pytest.raises(CheckpointError) as error:
        _restored(tmp_path)
    message = str(error.value)
    assert f"{tmp_path / 'step-000000060' / WEIGHTS} does not match the sha256" in message
    assert f"{tmp_path / 'step-000000040' / STATE} is not valid JSON" in message
    assert isinstance(error.value, ValueError)


def test_a_checkpoint_without_a_digest_that_h5py_cannot_read_is_a_clean_error(tmp_path):
    _save_steps(tmp_path, [40])
    state = json.loads((tmp_path / "step-000000040" / STATE).read_text())
    del state["weights_sha256"]  # kbert's earlier checkpoints recorded none
    (tmp_path / "step-000000040" / STATE).write_text(json.dumps(state))
    (tmp_path / "step-000000040" / WEIGHTS).write_bytes(b"\x89HDF\r\n\x1a\n" + b"\1" * 500)
    with pytest.warns(CheckpointWarning), pytest.raises(CheckpointError, match="cannot be "
                                                        "loaded"):
        _restored(tmp_path)


def test_another_runs_checkpoint_is_an_error(tmp_path):
    model = _model()
    save_checkpoint(tmp_path / "checkpoints", model,
                    {"epoch": 1, "step": 20, "run": {"batch_size": 8}})

    def validate(state, file):
        check_run_state(state, file, {"batch_size": 16}, ("batch_size",), 10, 200)

    with pytest.raises(ValueError, match="batch_size=8, not 16"):
        restore_checkpoint(tmp_path / "checkpoints", _model(), validate=validate)


def _legacy_checkpoint(path, model, step):
    path.mkdir(parents=True)
    model.save_weights(path / WEIGHTS)
    (path / STATE).write_text(json.dumps({"epoch": step // 20, "step": step}))


def test_kill_between_the_renames_of_the_earlier_layout(tmp_path):
    """The issue's state: kbert's former `_replace` moved `latest` (step 40) aside into
    `.latest.*.old/old` and was killed before renaming the complete step-60 staging in."""
    old, new = _model(seed=40), _model(seed=60)
    _legacy_checkpoint(tmp_path / ".latest.abcd1234.old" / "old", old, 40)
    _legacy_checkpoint(tmp_path / ".latest.efgh5678.tmp", new, 60)
    (tmp_path / ".latest.ijkl9012.tmp").mkdir()  # a save killed while writing: incomplete
    state, kernel = _restored(tmp_path)
    assert state["step"] == 60
    np.testing.assert_array_equal(kernel, new.layers[0].kernel.numpy())
    assert sorted(os.listdir(tmp_path)) == ["latest", "step-000000060"]
    assert _restored(tmp_path)[0]["step"] == 60


def test_kill_inside_a_replace_and_during_a_save(tmp_path):
    """Saving step 60 again (after a fall back) replaces it: killed between the renames, the
    aside directory holds the complete new checkpoint, which resuming puts in place."""
    kernels = _save_steps(tmp_path, [40])
    new = _model(seed=61)
    aside = tmp_path / f".step-000000060.{DEAD_PID}-abcd1234.old"
    save_checkpoint(aside, new, {"epoch": 3, "step": 60})
    os.rename(aside / "step-000000060", aside / "new")
    (aside / "latest").unlink()
    shutil.copytree(tmp_path / "step-000000040", aside / "old")
    (tmp_path / f".step-000000080.{DEAD_PID}-zzzz0000.tmp").mkdir()  # killed mid-write
    (tmp_path / f".latest.{DEAD_PID}.link").symlink_to("step-000000080")
    live = tmp_path / f".step-000000080.{os.getpid()}-yyyy0000.tmp"
    live.mkdir()  # a live writer's staging is never touched
    unrelated = tmp_path / ".step-000000080.notes.txt"
    unrelated.write_text("mine")
    state, kernel = _restored(tmp_path)
    assert state["step"] == 60
    np.testing.assert_array_equal(kernel, new.layers[0].kernel.numpy())
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["latest", "step-000000040", "step-000000060", live.name, unrelated.name])
    assert kernels  # step 40 stays as the fall back
