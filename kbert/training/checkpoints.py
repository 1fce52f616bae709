"""Training checkpoints that survive `kill -9` at any moment and damaged files.

    OUTPUT/checkpoints/
      step-000000040/  checkpoint.weights.h5 (model + optimizer), state.json (epoch, step,
      step-000000060/  the run's settings, the weights file's sha256)
      latest -> step-000000060   a symlink, for people and scripts

Each checkpoint gets a new name and is written whole before it appears
(`kbert.atomic.atomic_directory`), so saving never moves an older one aside; the older one is
deleted only once the new one is in place (the newest `KEEP` stay). `restore_checkpoint` takes
the newest checkpoint that passes every check (state.json readable and in range for the run,
weights file matching its recorded digest and loading into the model) and falls back to an
older one with a warning otherwise; when none is usable it stops with an error naming each
file and its problem. Staging left by a killed save is recovered (a complete one is promoted
under its step's name) or removed first.
"""

import hashlib
import json
import os
import pathlib
import re
import shutil
import warnings

from kbert.atomic import process_alive, atomic_directory, clean_staging

WEIGHTS = "checkpoint.weights.h5"
STATE = "state.json"
LATEST = "latest"
KEEP = 2
_NAME = re.compile(r"^step-(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from (the message names the file and why)."""


class CheckpointWarning(UserWarning):
    """A damaged checkpoint was skipped for an older one."""


def checkpoint_name(step: int) -> str:
    return f"step-{int(step):09d}"


def save_checkpoint(directory, model, state, keep=KEEP) -> pathlib.Path:
    """Writes `directory/step-N/` (N = state["step"]) whole, points `latest` at it, then
    deletes all but the newest `keep` checkpoints."""
    directory = pathlib.Path(directory)
    target = directory / checkpoint_name(state["step"])
    with atomic_directory(target, owned_files=(WEIGHTS, STATE)) as stage:
        model.save_weights(stage / WEIGHTS)
        state = {**state, "weights_sha256": _sha256(stage / WEIGHTS)}
        (stage / STATE).write_text(json.dumps(state, indent=2))
    _point_latest(directory, target.name)
    # Newer steps than this one are from before a fall back (damaged or abandoned): stale.
    kept = [path for step, path in _checkpoints(directory) if step <= state["step"]]
    for step, old in _checkpoints(directory):
        if old not in kept[:keep]:
            shutil.rmtree(old, ignore_errors=True)
    return target


def _point_latest(directory, name):
    link = directory / LATEST
    if link.is_dir() and not link.is_symlink():  # a checkpoint of kbert's earlier layout
        shutil.rmtree(link)
    tmp = directory / f".{LATEST}.{os.getpid()}.link"
    tmp.unlink(missing_ok=True)
    os.symlink(name, tmp)
    os.replace(tmp, link)


def list_checkpoints(directory) -> list:
    """The checkpoint directories under `directory`, newest step first (a `latest/` directory
    of the earlier one-checkpoint layout counts, by its recorded step)."""
    return [path for _, path in _checkpoints(directory)]


def _checkpoints(directory):
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for entry in os.listdir(directory):
        path = directory / entry
        match = _NAME.match(entry)
        if match and path.is_dir() and not path.is_symlink():
            found.append((int(match[1]), path))
        elif entry == LATEST and path.is_dir() and not path.is_symlink():
            found.append((_recorded_step(path), path))
    return sorted(found, key=lambda item: item[0], reverse=True)


def _recorded_step(path):
    try:
        return int(read_state(path)["step"])
    except (CheckpointError, ValueError, TypeError):
        return -1


def read_state(path) -> dict:
    """state.json of checkpoint `path`, checked for its shape; CheckpointError otherwise."""
    file = pathlib.Path(path) / STATE
    if not file.is_file():
        raise CheckpointError(f"{file} is missing: the checkpoint is incomplete.")
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{file} is not valid JSON ({error}).") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{file} does not hold a JSON object.")
    for key in ("epoch", "step"):
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CheckpointError(f"{file}: {key} must be a non-negative integer, got "
                                  f"{value!r}.")
    return state


def check_run_state(state, file, run, keys, epochs, total_steps):
    """For `restore_checkpoint(validate=...)`: ValueError when the checkpoint is another run's
    (a setting in `keys` differs from `run`), CheckpointError when its epoch or step lies past
    this run's `epochs` / `total_steps` (a damaged state.json: resuming would end the run early).
    """
    recorded = state.get("run")
    recorded = recorded if isinstance(recorded, dict) else {}
    for key in keys:
        if key in recorded and recorded[key] != run[key]:
            raise ValueError(f"{file.parent.parent.parent} holds a checkpoint of a run with "
                             f"{key}={recorded[key]!r}, not {run[key]!r}; use another output "
                             "folder or the same settings to resume.")
    if state["epoch"] > epochs or state["step"] > total_steps:
        raise CheckpointError(f"{file}: epoch {state['epoch']}, step {state['step']} lie past "
                              f"this run's end ({epochs} epochs, {total_steps} steps).")


def recover(directory):
    """Finishes or removes what killed saves left in `directory` (see the module docstring)."""
    directory = pathlib.Path(directory)

    def promote(staging):
        try:
            state = read_state(staging)
        except CheckpointError:
            return False
        target = directory / checkpoint_name(state["step"])
        if os.path.lexists(target) or not (staging / WEIGHTS).is_file():
            return False
        os.rename(staging, target)
        return True

    clean_staging(directory, keep=promote)
    for link in directory.glob(f".{LATEST}.*.link"):  # a killed save's half-made symlink
        pid = link.name.split(".")[2]
        if link.is_symlink() and pid.isdigit() and not process_alive(int(pid)):
            link.unlink()


def restore_checkpoint(directory, model, validate=None, clean=True):
    """Loads the newest usable checkpoint under `directory` into `model` (weights and
    optimizer) and returns its state dict; None when there is no checkpoint at all.

    `validate(state, state_file)` raises CheckpointError for a state that does not fit the run
    (e.g. an epoch past its end). Damaged checkpoints are skipped with a CheckpointWarning;
    if every checkpoint is damaged, CheckpointError lists them. `clean=False` (non-chief
    workers) leaves staging directories to the chief.
    """
    directory = pathlib.Path(directory)
    if clean and directory.is_dir():
        recover(directory)
    problems = []
    for path in list_checkpoints(directory):
        try:
            state = read_state(path)
            if validate is not None:
                validate(state, path / STATE)
            _load(model, path, state)
        except CheckpointError as error:
            problems.append(str(error))
            warnings.warn(f"Skipping checkpoint {path}: {error}", CheckpointWarning,
                          stacklevel=2)
            continue
        return state
    if problems:
        raise CheckpointError(f"No usable checkpoint in {directory}: " + " ".join(problems)
                              + " Delete the directory to start the run afresh.")
    return None


def _load(model, path, state):
    file = path / WEIGHTS
    if not file.is_file():
        raise CheckpointError(f"{file} is missing.")
    expected = state.get("weights_sha256")
    if expected is not None and _sha256(file) != expected:
        raise CheckpointError(f"{file} does not match the sha256 in {path / STATE}: the file "
                              "is damaged or was replaced.")
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    try:
        model.load_weights(file)
    except Exception as error:  # h5py and Keras raise OSError, ValueError, KeyError, ...
        raise CheckpointError(f"{file} cannot be loaded ({type(error).__name__}: "
                              f"{str(error)[:200]}).") from None


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()
