"""Directories that appear whole or not at all (checkpoints, exports, converted checkpoints).

A write goes to a hidden staging directory beside its target, `.<name>.<pid>-<random>.tmp`,
renamed into place once complete. Replacing an existing target takes two renames; between
them both directories sit in `.<name>.<pid>-<random>.old/` (`new/` and `old/`), so a process
killed there leaves a state `recover` can finish: the next write (or reader) that calls
`clean_staging` puts the complete new directory in place and removes what earlier, dead
processes left behind. Only names of exactly this shape are ever removed, never user files,
and never the staging of a process that is still running.
"""

import contextlib
import os
import pathlib
import re
import shutil
import tempfile

# mkdtemp's random part: 8 characters of [a-z0-9_]. The pid part is absent in directories
# written by kbert before this layout (they are cleaned too: their writer is long gone).
_STAGING = re.compile(r"^\.(?P<name>.+)\.(?:(?P<pid>\d+)-)?[a-z0-9_]{8}\.(?P<kind>tmp|old)$")


def is_staging_name(name) -> bool:
    """Whether `name` is that of a staging directory `atomic_directory` makes."""
    return _STAGING.match(name) is not None


@contextlib.contextmanager
def removed_if_unfinished(path, disposable=("logs",)):
    """A job that fails leaves no output directory it created and that holds nothing to
    resume from: on an error in the block, `path` is removed if it did not exist before and
    holds only names in `disposable` (TensorBoard logs). One with a checkpoint stays."""
    path = pathlib.Path(path)
    existed = os.path.lexists(path)
    try:
        yield path
    except BaseException:
        if not existed and path.is_dir() and not path.is_symlink() and {
                p.name for p in path.iterdir()} <= set(disposable):
            shutil.rmtree(path, ignore_errors=True)
        raise


def check_directory_target(path, what="directory"):
    """Raises FileExistsError when `path`, or a folder above it, is a file: a directory cannot
    be made there (Python says only "[Errno 17] File exists" or "[Errno 20] Not a directory",
    after the work), and `overwrite` must not turn a user's file into a directory."""
    path = pathlib.Path(os.path.abspath(os.fspath(path)))
    for place in (path, *path.parents):
        if os.path.lexists(place):
            if not place.is_dir():
                where = "" if place == path else f" (it would go inside {place})"
                raise FileExistsError(f"{place} is a file, not a {what}{where}.")
            return


@contextlib.contextmanager
def atomic_directory(path, owned_files=(), overwrite=False):
    """Yields an empty staging directory beside `path`; moves it to `path` when the block ends
    without error, and deletes it otherwise, so a reader never sees half a directory.

    An existing `path` is replaced only if it holds nothing but names in `owned_files` (entries
    ending in "*" are prefixes): a previous write of the same kind. Anything else needs
    `overwrite=True`, so that a mistyped path never wipes unrelated files. Staging left by
    killed writers of the same name is recovered or removed first (`clean_staging`).
    """
    path = pathlib.Path(os.path.abspath(os.fspath(path)))
    check_directory_target(path)
    clean_staging(path.parent, names=(path.name,))
    if os.path.lexists(path) and not overwrite and not _holds_only(path, owned_files):
        raise FileExistsError(f"{path} exists and holds other files; pass overwrite=True "
                              "to replace it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = make_staging(path, ".tmp")
    try:
        yield staging
        os.chmod(staging, 0o755)
        replace_directory(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def make_staging(path, suffix=".tmp") -> pathlib.Path:
    """A new hidden directory `.<name>.<pid>-<random><suffix>` beside `path`."""
    path = pathlib.Path(path)
    return pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}-", suffix=suffix,
                                         dir=path.parent))


def _holds_only(path: pathlib.Path, owned_files) -> bool:
    if not path.is_dir() or path.is_symlink():
        return False
    exact = {f for f in owned_files if not f.endswith("*")}
    prefixes = tuple(f[:-1] for f in owned_files if f.endswith("*"))
    return all(e in exact or (prefixes and e.startswith(prefixes)) for e in os.listdir(path))


def replace_directory(new: pathlib.Path, target: pathlib.Path) -> None:
    """Renames `new` to `target`. An old `target` is replaced in three renames through an
    aside directory (see the module docstring): at every moment either `target` is whole or
    the aside directory holds the complete new one for `recover` to finish the job."""
    if not os.path.lexists(target):
        os.rename(new, target)
        return
    aside = make_staging(target, ".old")
    try:
        os.rename(new, aside / "new")
        os.rename(target, aside / "old")
        os.rename(aside / "new", target)
    except BaseException:
        if not os.path.lexists(target):
            os.rename(aside / "old", target)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def staging_entries(parent, names=None):
    """(path, target name, kind "tmp" or "old", pid or None) for every kbert staging
    directory in `parent` (of the targets in `names`, if given)."""
    parent = pathlib.Path(parent)
    if not parent.is_dir():
        return []
    found = []
    for entry in sorted(os.listdir(parent)):
        match = _STAGING.match(entry)
        if not match or (names is not None and match["name"] not in names):
            continue
        path = parent / entry
        if path.is_dir() and not path.is_symlink():
            pid = int(match["pid"]) if match["pid"] else None
            found.append((path, match["name"], match["kind"], pid))
    return found


def clean_staging(parent, names=None, keep=None):
    """Recovers and removes the staging directories that dead writers left in `parent`.

    An aside directory (`.old`) of an interrupted replace puts its complete `new/` (else its
    `old/`) back under the target's name when that name is missing; then it and every dead
    writer's `.tmp` are deleted. `keep(path)` may return True to spare a `.tmp` (a caller that
    can recognise a complete one moves it first). Returns the targets restored.
    """
    restored = []
    for path, name, kind, pid in staging_entries(parent, names):
        if pid is not None and process_alive(pid):
            continue
        target = pathlib.Path(parent) / name
        if kind == "old":
            for part in ("new", "old"):
                if (path / part).is_dir() and not os.path.lexists(target):
                    os.rename(path / part, target)
                    restored.append(target)
        elif keep is not None and keep(path):
            continue
        shutil.rmtree(path, ignore_errors=True)
    return restored


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True
