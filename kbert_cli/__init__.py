"""The `kbert` command.

Parsing, `--help` and `--version` need neither kbert nor TensorFlow: `main` imports the
commands, and with them TensorFlow (its start-up notices hidden, `native_logs`), only once the
command line has parsed.

Examples:
    >>> from kbert_cli import build_parser
    >>> build_parser().parse_args(["finetune", "--steps", "5"]).steps
    5
"""

import sys

from kbert_cli import native_logs
from kbert_cli.config_file import parse
from kbert_cli.messages import (USER_ERRORS, out_of_memory, out_of_memory_advice,
                                plain_warnings, user_error)
from kbert_cli.parser import build_parser


def main(argv=None) -> int:
    """Runs one `kbert` command.

    Args:
        argv: the arguments after `kbert`; None for the command line. Given, the command runs
            as from Python: Python's own warnings stay as they are (a caller may be recording
            them) and TensorFlow is loaded as the caller has it.

    Returns:
        The exit status: 0, or 2 for a user's error (one line on stderr).
    """
    from_script = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parse(parser, argv)
    except USER_ERRORS as error:  # a --config file's errors name its keys as written
        return user_error(argv[0], error)
    if from_script:
        plain_warnings(args.command, parser)
        native_logs.load_tensorflow_quietly()
    from kbert_cli.commands import COMMANDS  # kbert and TensorFlow, once the line has parsed

    try:
        return COMMANDS[args.command](args)
    except USER_ERRORS as error:
        return user_error(args.command, error, parser)
    except Exception as error:
        if getattr(args, "batch_size", None) is None or not out_of_memory(error):
            raise
        return user_error(args.command, out_of_memory_advice(args))
