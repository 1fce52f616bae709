"""`kbert --help` needs no TensorFlow, and `import kbert` does nothing but define and register.

Each help runs in a new process under `python -X importtime`, which lists every module the
process imports: neither tensorflow nor keras (nor kbert) may be among them.
"""

import dataclasses
import os
import subprocess
import sys

import pytest

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "kbert")
KBERT = [_SCRIPT] if os.path.isfile(_SCRIPT) else ["-m", "kbert_cli"]


def imported_modules(argv):
    """(exit status, stdout, the top-level names of every module imported) of a new process."""
    done = subprocess.run([sys.executable, "-X", "importtime", *KBERT, *argv],
                          capture_output=True, text=True, timeout=120)
    names = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return done.returncode, done.stdout, names


@pytest.mark.parametrize("argv", [["--help"], ["finetune", "--help"], ["export", "--help"],
                                  ["--version"]])
def test_help_imports_no_tensorflow(argv):
    status, out, names = imported_modules(argv)
    assert status == 0
    assert "kbert" in out
    assert "argparse" in names  # importtime saw the imports
    assert not names & {"tensorflow", "keras", "kbert", "tensorflow_text", "numpy"}, names


def test_a_bad_flag_is_refused_without_tensorflow():
    status, _, names = imported_modules(["finetune", "--steps", "zero"])
    assert status == 2
    assert "tensorflow" not in names


def test_import_kbert_leaves_the_process_alone():
    """No log level set, no file descriptor redirected: the quieting is the command's."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    code = ("import os, kbert, keras; "
            "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'), "
            "keras.saving.get_registered_object('kbert>BertClassifier') is kbert.BertClassifier)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "True"]


def test_the_settings_file_is_current():
    """kbert_cli/settings.json is what the config dataclasses give (python -m kbert_cli.generate
    rewrites it)."""
    from kbert_cli import generate

    assert generate.main(["--check"]) == 0


def test_every_field_is_an_option_that_reaches_the_config():
    """A field's option sets that field: parsed with its flag, it comes back under its name."""
    from kbert.training.finetune_config import FinetuneConfig
    from kbert.training.pretrain_config import PretrainConfig
    from kbert_cli import build_parser, parse
    from kbert_cli.training_parsers import SETTINGS, config_kwargs

    for name, cls, required in (("finetune", FinetuneConfig, []),
                                ("pretrain", PretrainConfig, ["--steps", "1"])):
        kwargs = config_kwargs(parse(build_parser(), [name, *required]), name)
        fields = {f.name for f in dataclasses.fields(cls)
                  if f.metadata.get("cli", {}).get("command_line", True)}
        assert set(kwargs) == fields == {o["field"] for o in SETTINGS[name]}
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        changed = {k for k, v in kwargs.items() if v != defaults[k]}
        assert changed <= {"init", "output_dir", "steps"}, changed
