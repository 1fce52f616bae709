"""Every `kbert` command line the README, the docs and `kbert COMMAND --help` show still parses,
and every flag that they, the notebooks and kbert's docstrings name in passing exists: a renamed or
removed flag breaks this test, not a reader's first try. (What the commands do is tested in
tests/test_cli_processes.py.)"""

import pathlib
import re
import shlex

import pytest

import kbert_cli as cli
from kbert_cli.config_file import parse

ROOT = pathlib.Path(__file__).parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted(ROOT.glob("docs/**/*.md"))]
MENTIONS = [*PAGES, *sorted(ROOT.glob("notebooks/*.ipynb")), *sorted(ROOT.glob("kbert/**/*.py"))]
# Text that names a command without being one: `kbert COMMAND --help`, an error's prefix.
NOT_COMMANDS = re.compile(r"^kbert (COMMAND|CMD)\b")


def shell_lines(paths=PAGES):
    """The `kbert ...` lines of the shell blocks of `paths`: whole commands."""
    blocks = [block for path in paths for block in
              re.findall(r"```(?:bash|sh)\n(.*?)```", path.read_text(encoding="utf-8"), re.S)]
    return [line for block in blocks for line in block.splitlines() if line.startswith("kbert ")]


def inline_spans(paths=PAGES):
    """The inline `kbert SUBCOMMAND ...` spans of `paths` (one may wrap onto the next line):
    a command named in passing, often without its required arguments."""
    spans = {" ".join(s.split()) for path in paths
             for s in re.findall(r"`(kbert [a-z][^`]*)`", path.read_text(encoding="utf-8"))}
    return sorted(s for s in spans if not NOT_COMMANDS.match(s))


def help_examples():
    """Each subcommand's examples (the epilog of its --help) as (subcommand, line)."""
    return [(name, line.strip()) for name, command in cli.build_parser().commands.items()
            for line in command.epilog.splitlines()[1:] if "kbert " in line]


def argv_of(line):
    """The arguments after `kbert`: environment settings before it and a comment after it
    are the shell's."""
    words = shlex.split(line, comments=True)
    return words[words.index("kbert") + 1:]


def parses(argv, folder):
    """`argv` parsed as `kbert` parses it, in `folder`, where a --config file it names exists
    (its settings are not what is checked here)."""
    if "--config" in argv:
        (folder / argv[argv.index("--config") + 1]).write_text("seed: 0\n")
    return parse(cli.build_parser(), argv)


def test_the_readme_shows_every_command():
    named = {argv_of(line)[0] for line in shell_lines([README]) + inline_spans([README])}
    assert named == set(cli.build_parser().commands), named


def test_the_docs_show_every_command():
    named = {argv_of(line)[0] for line in shell_lines() + inline_spans()}
    assert named == set(cli.build_parser().commands), named
    assert len(shell_lines()) >= 30 and len(inline_spans()) >= 20


@pytest.mark.parametrize("line", shell_lines())
def test_documented_command_parses(line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parses(argv_of(line), tmp_path).command == argv_of(line)[0]


@pytest.mark.parametrize("span", inline_spans(MENTIONS))
def test_flags_named_in_passing_exist(span):
    name, *words = argv_of(span)
    command = cli.build_parser().commands[name]
    known = {flag for action in command._actions for flag in action.option_strings}
    named = [word.split("=")[0] for word in words if word.startswith("--")]
    assert set(named) <= known, f"`{span}`: kbert {name} has no {set(named) - known}"


@pytest.mark.parametrize("name, line", help_examples())
def test_help_example_parses(name, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert argv_of(line)[0] == name, line
    assert parses(argv_of(line), tmp_path).command == name
