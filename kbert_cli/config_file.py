"""`--config FILE` for the `kbert` command: a YAML or JSON file of a subcommand's options
that become its defaults, with flags on the command line taking precedence."""

import argparse

_UNSET = object()  # stands for an exclusive option that the command line did not give


def add_config_options(parser, commands):
    """Gives every subcommand `--config FILE` and keeps them as `parser.commands` for `parse`."""
    for command in commands.choices.values():
        command.add_argument("--config", metavar="FILE",
                             help="a YAML or JSON file of this command's options (keys: option "
                                  "names); flags given on the command line override it")
    parser.commands = commands.choices


def _read_config(path):
    """The mapping in a YAML or JSON file (.json is read as JSON, anything else as YAML); a
    `ValueError` naming the file for one that is missing, unreadable, malformed or nested
    too deep."""
    import json
    import pathlib

    import yaml

    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"--config {path}: " + (
            "is a directory, not a file." if path.is_dir() else "no such file."))
    try:
        text = path.read_text(encoding="utf-8")
        values = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--config {path}: cannot read it: {error}.") from None
    except (ValueError, yaml.YAMLError) as error:
        where = getattr(error, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        first = str(getattr(error, "problem", None) or error).splitlines()[0]
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise ValueError(f"--config {path} is not valid {kind}{line}: {first}.") from None
    except RecursionError:
        raise ValueError(f"--config {path} is nested too deeply to be a config file.") from None
    if not isinstance(values, dict):
        raise ValueError(f"--config {path} must hold a mapping of option names to values.")
    return values


def _config_value(action, value):
    """`value` from a config file, checked and converted as argparse does a flag's."""
    if value is None:  # `steps: null`: the option is not set
        return None
    if action.nargs == 0:  # a switch such as --whole-word
        if not isinstance(value, bool):
            raise ValueError(f"is a switch: give true or false, not {value!r}")
        return value
    if action.nargs in ("+", "*"):
        return [_one_value(action, v) for v in (value if isinstance(value, list) else [value])]
    return _one_value(action, value)


def _one_value(action, value):
    if isinstance(value, (list, dict)):
        raise ValueError(f"takes one value, not {value!r}")
    try:
        value = (action.type or str)(str(value))  # YAML reads 1e-4 as a string, 5 as an int
    except argparse.ArgumentTypeError as error:  # the flag's own check says what it takes
        raise ValueError(str(error)) from None
    except ValueError:
        kind = {int: "an integer", float: "a number"}.get(action.type, action.type.__name__)
        raise ValueError(f"takes {kind}, not {value!r}") from None
    if action.choices and value not in action.choices:
        raise ValueError(f"is one of {', '.join(map(str, action.choices))}, not {value!r}")
    return value


def parse(parser, argv):
    """`parser.parse_args(argv)`, where a subcommand's `--config FILE` gives the defaults.

    Options named in the file become defaults and need not be given; flags on the command line
    override them. In a group of exclusive options (--steps | --epochs, --init | --preset), a
    flag on the command line replaces the file's choice in that group.
    """
    command = parser.commands.get(argv[0]) if argv else None
    peek = argparse.ArgumentParser(prog=f"kbert {argv[0]}" if command else "kbert",
                                   add_help=False)
    peek.add_argument("--config")
    path = peek.parse_known_args(argv[1:])[0].config if command else None
    if path is None:
        return parser.parse_args(argv)

    options = {a.dest: a for a in command._actions
               if a.option_strings and a.dest not in ("help", "config")}
    values = {}
    for name, value in _read_config(path).items():
        dest = str(name).replace("-", "_")
        if dest not in options:
            raise ValueError(f"{path}: unknown option {name!r} for `kbert {argv[0]}`; valid "
                             f"options: {', '.join(d.replace('_', '-') for d in options)}.")
        try:
            values[dest] = _config_value(options[dest], value)
        except ValueError as error:
            raise ValueError(f"{path}: {name} {error}.") from None
        options[dest].required = False

    groups = []  # the exclusive groups the file has a say in, as lists of dests
    for group in command._mutually_exclusive_groups:
        dests = [a.dest for a in group._group_actions]
        in_file = [dest for dest in dests if dest in values]
        if len(in_file) > 1:
            raise ValueError(f"{path}: give only one of {', '.join(in_file)}.")
        if in_file:
            group.required = False
            groups.append(dests)
    grouped = {dest: options[dest].default for dests in groups for dest in dests}
    command.set_defaults(**{**values, **dict.fromkeys(grouped, _UNSET)})
    args = parser.parse_args(argv)
    for dests in groups:
        given = any(getattr(args, dest) is not _UNSET for dest in dests)
        for dest in dests:
            if getattr(args, dest) is _UNSET:
                setattr(args, dest, grouped[dest] if given else values.get(dest, grouped[dest]))
    return args
