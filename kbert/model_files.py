"""Reading a saved `.keras` model file: one that kbert cannot read is refused in one line that
names it and says what is wrong (empty, not a zip archive, a config that names no kbert or Keras
model, weights that cannot be read), not with a Keras or h5py traceback. Keras' safe mode stays
on: nothing in the file is run.
"""

import json
import os
import pathlib
import zipfile
import zlib

CONFIG_MEMBER = "config.json"
"""The member of a `.keras` archive that describes the model (Keras' `saving_lib`)."""
MODEL_PACKAGES = ("kbert", "keras")
"""The packages whose classes a model file may name at its top: kbert's task models, and Keras'
own for a plain Keras model (`kbert export MODEL.keras`)."""
_MESSAGE_CHARS = 300  # of a Keras or h5py message quoted in one line


class ModelFileError(ValueError):
    """A saved model file that kbert cannot read, named with what is wrong with it."""


def _quoted(error):
    """`error`'s message on one line, its first sentence where Keras goes on for lines."""
    message = " ".join(str(error).split()) or type(error).__name__
    if message.startswith("Could not locate"):
        message = message.split(". ", 1)[0]
    return message if len(message) <= _MESSAGE_CHARS else message[:_MESSAGE_CHARS] + "…"


def _damaged(path, what):
    return ModelFileError(f"{path} is damaged: {what}; was it copied whole?")


def check_model_file(path):
    """Checks that `path` is a `.keras` archive whose config.json names a kbert or Keras model
    (`MODEL_PACKAGES`), before Keras reads it.

    Args:
      path: the `.keras` file.

    Raises:
      FileNotFoundError: nothing is at `path`.
      ModelFileError: the file is empty, not a zip archive, or its config.json is missing,
        not JSON, not an object, or names a class of another package (`os.system`).
    """
    path = pathlib.Path(os.fspath(path))
    if not path.exists():
        raise FileNotFoundError(f"No model file at {path}.")
    if path.is_dir():
        raise ModelFileError(f"{path} is a directory, not a saved model file.")
    if path.stat().st_size == 0:
        raise ModelFileError(f"{path} is empty (0 bytes); was it copied whole?")
    try:
        with zipfile.ZipFile(path) as archive:
            text = archive.read(CONFIG_MEMBER)
    except KeyError:
        raise _damaged(path, f"the archive holds no {CONFIG_MEMBER}") from None
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as error:
        if isinstance(error, PermissionError):
            raise
        raise _damaged(path, f"not a .keras archive ({_quoted(error)})") from None
    try:
        config = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise _damaged(path, f"its {CONFIG_MEMBER} is not JSON ({_quoted(error)})") from None
    except RecursionError:
        raise ModelFileError(f"{path} holds no kbert model config: its {CONFIG_MEMBER} is "
                             "nested too deeply.") from None
    _check_config(config, path)


def _check_config(config, path):
    """The top of a config.json: an object naming a class of `MODEL_PACKAGES`."""
    refused = f"{path} holds no kbert model config: its {CONFIG_MEMBER}"
    if not isinstance(config, dict):
        raise ModelFileError(f"{refused} holds a JSON {type(config).__name__}, not an object.")
    name, module = config.get("class_name"), config.get("module")
    if not isinstance(name, str) or not isinstance(config.get("config"), dict):
        raise ModelFileError(f"{refused} lacks a \"class_name\" and its \"config\" object.")
    if module is not None and (not isinstance(module, str)
                               or module.split(".", 1)[0] not in MODEL_PACKAGES):
        raise ModelFileError(f"{refused} names {module}.{name}, not a kbert or Keras model.")


def load_model_file(path, compile=False):
    """The model saved in the `.keras` file `path` (Keras safe mode: no code is run).

    Args:
      path: the saved model file (a `.keras` archive is checked first: `check_model_file`).
      compile: restore the training configuration too.

    Raises:
      ModelFileError: a file kbert cannot read, named with what is wrong: damaged weights
        (truncated, not HDF5), a config Keras cannot rebuild, or a `check_model_file` fault.
    """
    import keras

    path = pathlib.Path(os.fspath(path))
    if path.suffix == ".keras":
        check_model_file(path)
    try:
        return keras.saving.load_model(path, compile=compile, safe_mode=True)
    except (FileNotFoundError, PermissionError, ModelFileError):
        raise
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise _damaged(path, f"its weights cannot be read ({_quoted(error)})") from None
    except (TypeError, ValueError, KeyError, IndexError) as error:
        raise ModelFileError(f"{path} holds a model kbert cannot rebuild: "
                             f"{_quoted(error)}") from None
