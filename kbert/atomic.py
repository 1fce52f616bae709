"""Directories that appear whole or not at all (checkpoints, exports)."""

import contextlib
import os
import pathlib
import shutil
import tempfile


@contextlib.contextmanager
def atomic_directory(path, owned_files=(), overwrite=False):
    """Yields an empty staging directory beside `path`; moves it to `path` when the block ends
    without error, and deletes it otherwise, so a reader never sees half a directory.

    An existing `path` is replaced only if it holds nothing but names in `owned_files` (entries
    ending in "*" are prefixes): a previous write of the same kind. Anything else needs
    `overwrite=True`, so that a mistyped path never wipes unrelated files.
    """
    path = pathlib.Path(os.path.abspath(os.fspath(path)))
    if os.path.lexists(path) and not overwrite and not _holds_only(path, owned_files):
        raise FileExistsError(f"{path} exists and holds other files; pass overwrite=True to "
                              "replace it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp",
                                            dir=path.parent))
    try:
        yield staging
        os.chmod(staging, 0o755)
        _replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _holds_only(path: pathlib.Path, owned_files) -> bool:
    if not path.is_dir() or path.is_symlink():
        return False
    exact = {f for f in owned_files if not f.endswith("*")}
    prefixes = tuple(f[:-1] for f in owned_files if f.endswith("*"))
    return all(e in exact or (prefixes and e.startswith(prefixes)) for e in os.listdir(path))


def _replace(new: pathlib.Path, target: pathlib.Path) -> None:
    """Renames `new` to `target`; an old `target` is moved aside first and restored on failure."""
    if not os.path.lexists(target):
        os.rename(new, target)
        return
    aside = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old",
                                          dir=target.parent))
    os.rename(target, aside / "old")
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(aside / "old", target)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)
