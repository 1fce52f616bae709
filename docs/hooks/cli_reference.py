"""MkDocs hook: the `<!-- cli-reference -->` marker becomes every `kbert` command's --help.

The reference is generated from `kbert_cli.build_parser()` at build time, so it cannot drift
from the parser.
"""

import os

from kbert_cli import build_parser

MARKER = "<!-- cli-reference -->"


def cli_reference() -> str:
    """Markdown for `kbert --help` and each `kbert COMMAND --help`, in the parser's order."""
    os.environ.setdefault("COLUMNS", "100")  # argparse wraps help at the terminal's width
    parser = build_parser()
    parts = ["## kbert", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, command in parser.commands.items():
        parts += [f"## kbert {name}", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files):
    """Replaces the marker on the page that holds it."""
    return markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
