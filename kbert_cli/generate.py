"""Writes `kbert_cli/settings.json`: the training commands' options, from the config dataclasses.

Each field of `FinetuneConfig`, `DataFiles` (finetune's own files) and `PretrainConfig`
(`kbert.settings`) becomes an option: its flag, the check of its value, its default and its
help (the class's `Args:` entry). The file
is kept in the repository so that `kbert --help` reads it without importing kbert, which loads
TensorFlow; tests/test_cli_help.py checks that it is current.

Usage: python -m kbert_cli.generate [--check]
"""

import argparse
import dataclasses
import json
import pathlib
import sys
import types

SETTINGS_FILE = pathlib.Path(__file__).with_name("settings.json")


def docstring_args(cls):
    """{name: text} of the `Args:` section of `cls`'s docstring, each entry on one line."""
    lines = (cls.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    indent = len(lines[start]) - len(lines[start].lstrip()) + 4
    entries, name = {}, None
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        if line.strip() and len(line) - len(line.lstrip()) == indent:
            name, _, text = line.strip().partition(": ")
            entries[name] = text
        elif line.strip():
            entries[name] += " " + line.strip()
    return entries


def _base_type(annotation):
    """int for `int | None`, and so on; `object` for anything else."""
    if isinstance(annotation, types.UnionType):
        kinds = [a for a in annotation.__args__ if a is not type(None)]
        annotation = kinds[0] if kinds else object
    return annotation if annotation in (int, float, bool, str) else object


def options(cls):
    """The command-line options of config dataclass `cls`, as JSON-ready dicts."""
    helps = docstring_args(cls)
    found = []
    for field in dataclasses.fields(cls):
        cli = field.metadata.get("cli", {})
        if not cli.get("command_line", True):
            continue
        default = cli.get("default", None if field.default is dataclasses.MISSING
                          else field.default)
        base = _base_type(field.type)
        kind = cli.get("kind") or {int: "count", float: "positive", bool: "switch"}.get(
            base, "text")
        name = field.name.replace("_", "-")
        flag = cli.get("flag") or (f"--no-{name}" if cli.get("negated") else f"--{name}")
        help_text = helps[field.name]
        if default not in (None, False) and kind != "switch":
            help_text = f"{help_text.removesuffix('.')} (default {default})."
        found.append({
            "field": field.name, "flag": flag, "dest": flag[2:].replace("-", "_"),
            "kind": kind, "default": default, "help": help_text,
            "choices": list(cli["choices"]) if cli.get("choices") else None,
            "metavar": cli.get("metavar"), "group": cli.get("group"),
            "required": cli.get("required", False), "negated": cli.get("negated", False)})
    return found


def settings():
    """{command: its generated options}."""
    from kbert.data.own_files import DataFiles
    from kbert.training.finetune_config import FinetuneConfig
    from kbert.training.pretrain_config import PretrainConfig

    return {"finetune": options(FinetuneConfig), "files": options(DataFiles),
            "pretrain": options(PretrainConfig)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the file is not what the dataclasses give")
    args = parser.parse_args(argv)
    text = json.dumps(settings(), indent=1) + "\n"
    if args.check:
        current = SETTINGS_FILE.read_text(encoding="utf-8") if SETTINGS_FILE.exists() else ""
        if current != text:
            print(f"{SETTINGS_FILE} is out of date: run python -m kbert_cli.generate",
                  file=sys.stderr)
            return 1
        return 0
    SETTINGS_FILE.write_text(text, encoding="utf-8")
    print(f"Wrote {SETTINGS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
