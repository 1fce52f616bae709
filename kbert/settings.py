"""`setting`: a field of a run's config dataclass that also says how the `kbert` command takes it.

The training commands' options are generated from the config dataclasses (`FinetuneConfig`,
`PretrainConfig`): the flag from the field's name, the value's check from its `kind`, the
default from the field, the help from the class's `Args:`. `python -m kbert_cli.generate`
writes them to `kbert_cli/settings.json`, which the `kbert` command reads, so that its --help
needs no TensorFlow.
"""

import dataclasses

KINDS = {
    "count": "an integer >= 1",
    "index": "an integer >= 0",
    "positive": "a finite number > 0",
    "number": "a finite number",
    "rate": "a number in [0, 1)",
    "fraction": "a number in [0, 1]",
    "batches": "a batch number or FIRST,LAST",
    "text": "text",
    "switch": "a switch",
}
"""The checks a command-line value gets, by name (`kbert_cli.option_types` has them)."""


def setting(default=None, *, kind=None, flag=None, group=None, required=False, choices=None,
            metavar=None, command_line=True, cli_default=dataclasses.MISSING, negated=False):
    """A dataclass field with its command-line facts in `metadata["cli"]`.

    Args:
        default: the field's default.
        kind: a key of `KINDS`; None: from the field's type (int: "count", float:
            "positive", bool: "switch", else "text").
        flag: the option's name; None: `--` and the field's name with dashes.
        group: options of one group are mutually exclusive.
        required: one option of the group must be given.
        choices: the values the option takes.
        metavar: the value's name in --help.
        command_line: False for a setting the command does not take (a Python object).
        cli_default: the command's default where it differs from the field's (a required
            field's, for one).
        negated: the flag is `--no-NAME` and sets the field to False.

    Returns:
        A `dataclasses.Field`.

    Examples:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Run:
        ...     steps: int = setting(None, group="length")
        >>> dataclasses.fields(Run)[0].metadata["cli"]["group"]
        'length'
    """
    cli = {"kind": kind, "flag": flag, "group": group, "required": required, "choices": choices,
           "metavar": metavar, "command_line": command_line, "negated": negated}
    if cli_default is not dataclasses.MISSING:
        cli["default"] = cli_default
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}.")
    return dataclasses.field(default=default, metadata={"cli": cli})
