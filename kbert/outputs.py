"""The one rule for where a `kbert` command writes.

An output is a new folder, or an existing kbert output of the same kind. Anything else is
refused by name unless `overwrite`. `overwrite` never applies to `/`, the home folder, the
current folder, a folder above one of these, an input, or a folder that holds an input.

A kbert output folder carries a marker file, `.kbert-output`, naming its kind. A replacement
is staged beside the target (`stage_path`) and swapped in only once complete (`swap_in`): until
then the old output stays whole, and a killed replacement resumes from its own staging.

Examples:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "run"
    >>> check_output(folder, "finetune")
    'new'
    >>> mark(folder, "finetune")
    >>> check_output(folder, "finetune")
    'same'
    >>> (folder / "notes.txt").write_text("mine")
    4
    >>> check_output(folder, "pretrain")
    Traceback (most recent call last):
    ...
    kbert.outputs.OutputError: --output ... holds a kbert finetune output; pass --overwrite to replace it, or choose a new folder.
"""

import json
import os
import pathlib
import shutil

from kbert.atomic import check_directory_target, make_staging, replace_directory

MARKER = ".kbert-output"


class OutputError(ValueError):
    """An output the command must not write to."""


def _absolute(path) -> pathlib.Path:
    return pathlib.Path(os.path.abspath(os.fspath(path)))


def kind_of(path, unmarked=None):
    """The kind a kbert output folder was marked with; None for any other folder.

    Args:
      path: a folder.
      unmarked: (kind, test) for outputs of `kind` written without a marker: `test(path)`
        says whether `path` is one.

    Returns:
      The kind, e.g. "finetune", or None.
    """
    path = pathlib.Path(path)
    marker = path / MARKER
    if marker.is_file() and not marker.is_symlink():
        try:
            value = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value.get("kind") if isinstance(value, dict) else None
    if unmarked is not None and unmarked[1](path):
        return unmarked[0]
    return None


def mark(path, kind):
    """Creates `path` if needed and marks it as a kbert output of `kind`.

    Args:
      path: the output folder.
      kind: its kind, e.g. "finetune".
    """
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    if marker.is_symlink():
        marker.unlink()
    if kind_of(path) != kind:
        marker.write_text(json.dumps({"kind": kind}) + "\n", encoding="utf-8")


def _is_empty_folder(path):
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def check_output(path, kind, overwrite=False, inputs=(), flag="--output", unmarked=None):
    """Checks a command's output folder before any work, by the module's rule.

    Args:
      path: the output folder.
      kind: what the command writes there ("finetune", "pretrain", "evaluation", ...).
      overwrite: whether the user asked to replace what is there.
      inputs: the paths the command reads (checkpoints, data, corpora).
      flag: the option that named `path`, for the error message.
      unmarked: a test of whether a folder is an output of `kind` written without a marker.

    Returns:
      "new" (no folder, or an empty one), "same" (a kbert output of `kind`) or "other"
      (anything else, allowed by `overwrite`).

    Raises:
      OutputError: the folder may not be written.
    """
    path = _absolute(path)
    check_directory_target(path, f"directory for {flag}")
    check_not_an_input(path, inputs, flag)
    if not os.path.lexists(path) or _is_empty_folder(path):
        return "new"
    found = kind_of(path, unmarked and (kind, unmarked)) if path.is_dir() else None
    if found == kind:
        if overwrite:
            check_overwrite(path, inputs, flag)
        return "same"
    if not overwrite:
        what = f"holds a kbert {found} output" if found else "exists and is not a kbert output"
        raise OutputError(f"{flag} {path} {what}; pass --overwrite to replace it, or choose a "
                          "new folder.")
    check_overwrite(path, inputs, flag)
    return "other"


def check_not_an_input(path, inputs, flag="--output"):
    """Refuses an output that is an input or holds one.

    Args:
      path: the output (file or folder).
      inputs: the paths the command reads.
      flag: the option that named `path`.

    Raises:
      OutputError: `path` is one of `inputs` or a folder above one.
    """
    real = pathlib.Path(os.path.realpath(path))
    for given in inputs:
        if not isinstance(given, (str, os.PathLike)) or not os.path.lexists(given):
            continue
        source = pathlib.Path(os.path.realpath(given))
        if source == real or real in source.parents:
            what = "is" if source == real else "holds"
            raise OutputError(f"{flag} {path} {what} the input {given}: an output never "
                              "replaces an input.")


def check_overwrite(path, inputs=(), flag="--output"):
    """Refuses `--overwrite` of `/`, the home or current folder, a folder above them, or one
    that is or holds an input.

    Args:
      path: the output to be replaced.
      inputs: the paths the command reads.
      flag: the option that named `path`.

    Raises:
      OutputError: `path` is one of those.
    """
    path = _absolute(path)
    real = pathlib.Path(os.path.realpath(path))
    for place, name in ((pathlib.Path("/"), "the root folder"),
                        (pathlib.Path(os.path.realpath(os.path.expanduser("~"))),
                         "your home folder"),
                        (pathlib.Path(os.path.realpath(os.getcwd())), "the current folder")):
        if real == place or real in place.parents:
            what = f"is {name}" if real == place else f"holds {name}"
            raise OutputError(f"--overwrite never replaces {path}: it {what}.")
    check_not_an_input(path, inputs, flag)


def check_output_file(path, overwrite=False, inputs=(), flag="--output"):
    """Checks an output file before any work: a new file, or with `overwrite` an existing
    one; never a folder, nor one of `inputs`.

    Args:
      path: the file to write.
      overwrite: whether an existing file may be replaced.
      inputs: the paths the command reads.
      flag: the option that named `path`.

    Raises:
      OutputError: the file may not be written.
    """
    path = _absolute(path)
    check_directory_target(path.parent, f"directory for {flag}")
    if path.is_dir():
        raise OutputError(f"{flag} {path} is a directory; give a file path.")
    check_not_an_input(path, inputs, flag)
    if os.path.lexists(path) and not overwrite:
        raise OutputError(f"{flag} {path} exists; pass --overwrite to replace it, or choose a "
                          "new file.")


def staged_file(path) -> pathlib.Path:
    """A new hidden file beside `path` for its content, made with the user's umask.

    Args:
      path: the file it will replace (`os.replace(staged, path)`).

    Returns:
      The staged file's path.
    """
    path = _absolute(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if os.path.lexists(staged):
        staged.unlink()
    staged.touch(exist_ok=False)
    return staged


def write_text(path, text):
    """Writes `text` to `path` whole or not at all, with the user's umask.

    Args:
      path: the file.
      text: its content.
    """
    staged = staged_file(path)
    try:
        staged.write_text(text, encoding="utf-8")
        os.replace(staged, path)
    finally:
        if os.path.lexists(staged):
            staged.unlink()


def write_folder(target, kind, files):
    """Writes the output folder `target` whole or not at all: `files` ({name: text}) and its
    marker, staged beside it and swapped in. Its other entries, the user's, stay.

    Args:
      target: the folder.
      kind: its kind, for the marker.
      files: {file name: text}.
    """
    target = _absolute(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = make_staging(target, ".tmp")
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        mark(staging, kind)
        os.chmod(staging, 0o777 & ~umask())
        swap_in(staging, target, lambda entry: entry.name in files)
    finally:
        if os.path.lexists(staging):
            shutil.rmtree(staging, ignore_errors=True)


def umask() -> int:
    """The process's umask (read by setting it, then setting it back).

    Returns:
      The mask, e.g. 0o022: a new file's mode is 0o666 & ~umask().
    """
    mask = os.umask(0)
    os.umask(mask)
    return mask


def stage_path(target) -> pathlib.Path:
    """Where a replacement of `target` is built: a hidden folder beside it, the same for every
    attempt, so that a killed replacement resumes there.

    Args:
      target: the output folder being replaced.

    Returns:
      `.<name>.kbert-new` in `target`'s parent.
    """
    target = _absolute(target)
    return target.with_name(f".{target.name}.kbert-new")


def working_folder(target, kind, status, overwrite, names):
    """Where a job writes once `check_output` gave `status`: `target` itself, or when
    `overwrite` replaces an existing folder, its staging (`stage_path`). Links among `names` in
    `target` (every link in the staging) are removed first (`unlink_links`).

    Args:
      target: the output folder.
      kind: the job's output kind.
      status: what `check_output` returned for `target`.
      overwrite: whether the job replaces what is there.
      names: the entries the job writes in its folder.

    Returns:
      The folder to write in.

    Raises:
      OutputError: something other than an earlier staging of `kind` is at the staging path.
    """
    target = pathlib.Path(target)
    if status == "new" or not overwrite:
        unlink_links(target, names)
        return target
    staging = stage_path(target)
    if os.path.lexists(staging) and kind_of(staging) != kind:
        raise OutputError(f"{staging} is in the way of the new run; move it away.")
    unlink_links(staging)
    return staging


def swap_in(staging, target, owned):
    """Puts the complete `staging` folder in place of `target`.

    The entries of the old `target` that are not kbert's (names not in `owned`, and not
    already in `staging`) move into `staging` first, so that a user's own files stay.

    Args:
      staging: the complete new output.
      target: the folder it replaces.
      owned: a function of an entry's path: whether kbert wrote it (replaced, not kept).
    """
    staging, target = _absolute(staging), _absolute(target)
    if target.is_dir() and not target.is_symlink():
        for entry in sorted(target.iterdir()):
            if entry.name != MARKER and not owned(entry) and not os.path.lexists(
                    staging / entry.name):
                os.rename(entry, staging / entry.name)
    elif os.path.lexists(target):
        target.unlink()
    replace_directory(staging, target)


def unlink_links(path, names=None):
    """Removes the symbolic links in an output folder (never their targets), so that no write
    goes through one.

    Args:
      path: the output folder.
      names: the entries to clear (all when None); folders among them are walked.
    """
    path = pathlib.Path(path)
    if not path.is_dir() or path.is_symlink():
        return
    for entry in path.iterdir():
        if names is not None and entry.name not in names and not any(
                entry.name.startswith(n[:-1]) for n in names if n.endswith("*")):
            continue
        if entry.is_symlink():
            entry.unlink()
        elif entry.is_dir():
            for root, folders, files in os.walk(entry):
                for name in folders + files:
                    if os.path.islink(os.path.join(root, name)):
                        os.unlink(os.path.join(root, name))
