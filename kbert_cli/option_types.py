"""argparse value types of the `kbert` command, each refusing a bad value at parse time with a
message that says what the option takes; `subcommand`, how every subcommand is declared, and
`allow_pickle_option`, the one opt-in every command that reads a checkpoint shares."""

import argparse
import math


def positive_int(text):
    """argparse type: an integer ≥ 1 (a count, a size, a length), refused at parse time."""
    return _integer(text, 1, "a positive integer")


def non_negative_int(text):
    """argparse type: an integer ≥ 0 (a seed; 0 = "never" for --checkpoint-every)."""
    return _integer(text, 0, "a non-negative integer")


def _integer(text, minimum, kind):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes an integer, not {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"takes {kind}, not {text!r}")
    return value


def positive_float(text):
    """argparse type: a finite number > 0 (a learning rate; "nan" and "inf" are refused)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"takes a positive number, not {text!r}")
    return value


def dropout_rate(text):
    """argparse type: a number in [0, 1) (a dropout rate)."""
    value = finite_float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"takes a rate in [0, 1), not {text!r}")
    return value


def fraction(text):
    """argparse type: a number in [0, 1] (a share of steps, a probability)."""
    value = finite_float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"takes a number in [0, 1], not {text!r}")
    return value


def finite_float(text):
    """argparse type: a finite number (Python's float() also takes "nan" and "inf")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number, not {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"takes a finite number, not {text!r}")
    return value


def batch_range(text):
    """argparse type for --profile-batches: "10,20" → (10, 20); "10" → 10 (one batch)."""
    try:
        numbers = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST,LAST batch numbers, got {text!r}")
    if len(numbers) not in (1, 2) or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"expected FIRST,LAST batch numbers, got {text!r}")
    return numbers[0] if len(numbers) == 1 else numbers


def subcommand(commands, name, help, description, examples):
    """A `kbert` subcommand whose --help shows `description` and then `examples`, as written."""
    return commands.add_parser(
        name, help=help, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=description, epilog="examples:\n" + examples)


def allow_pickle_option(command, what="a checkpoint's pytorch_model.bin"):
    """--allow-pickle: the commands that read checkpoints refuse a pickle unless asked."""
    command.add_argument("--allow-pickle", action="store_true",
                         help=f"read {what} (unpickling runs code: trusted files only)")
