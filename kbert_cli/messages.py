"""How the `kbert` command reports what goes wrong: a user's error as one line in the
command's own terms (its flags, not the library's argument names), warnings likewise, and what
to retry with after running out of memory."""

import re
import sys
import warnings


def out_of_memory(error):
    tensorflow = sys.modules.get("tensorflow")
    return isinstance(error, MemoryError) or (
        tensorflow is not None and isinstance(error, tensorflow.errors.ResourceExhaustedError))


def out_of_memory_advice(args):
    """What to retry with after training ran out of memory at `args.batch_size`."""
    if args.batch_size <= 1:
        return ("ran out of memory at batch size 1: retry with a shorter --sequence-length or "
                "a smaller model (--preset).")
    retry = f"--batch-size {args.batch_size // 2}"
    if getattr(args, "gradient_accumulation_steps", None):
        retry += (f" --gradient-accumulation-steps {2 * args.gradient_accumulation_steps} "
                  "(the same batch per update)")
    return (f"ran out of memory at batch size {args.batch_size}: retry with a smaller batch, "
            f"e.g. {retry}.")


USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, PermissionError,
               IsADirectoryError, NotADirectoryError)
"""What a user's input or files cause (kbert's errors subclass ValueError): one line on stderr
and exit status 2, never a traceback."""


def user_error(command, error, parser=None) -> int:
    """Prints `kbert CMD: error: ...` (`in_command_terms`); the exit status, 2."""
    print(f"kbert {command}: error: {in_command_terms(str(error), command, parser)}",
          file=sys.stderr)
    return 2


def in_command_terms(message, command, parser=None):
    """`message` in the terms of `parser`'s subcommand `command` (`in_cli_terms`), if known."""
    subcommand = getattr(parser, "commands", {}).get(command)
    return message if subcommand is None else in_cli_terms(message, subcommand)


def in_cli_terms(message, subcommand):
    """A library error as the command line says it: for this command's options,
    `allow_pickle=True` → `--allow-pickle`, `sequence_length=600` → `--sequence-length 600`,
    `batch_size` → `--batch-size` (Python names only in snake_case or with `=`, so that plain
    words stay words; never a name in double quotes, a JSON key as a file spells it)."""
    flags = {action.dest: action.option_strings[-1] for action in subcommand._actions
             if any(o.startswith("--") for o in action.option_strings)}

    def flag(match):
        name, value = match.group(1), match.group(2)
        if name not in flags or (value is None and "_" not in name):
            return match.group(0)
        if value in (None, "True"):
            return flags[name]
        return f"{flags[name]} {value}"

    return re.sub(r'(?<!")`?\b([a-z][a-z0-9_]*)\b(?:=([^\s`,;:)]+))?`?', flag, message)


def plain_warnings(command, parser):
    """Warnings as one line, `kbert CMD: warning: ...` in the command's terms, not Python's
    `/path/to/kbert/module.py:235: UserWarning: ...` and the line of code that warned."""

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"kbert {command}: warning: {in_command_terms(str(message), command, parser)}",
              file=file or sys.stderr)

    warnings.showwarning = show
