"""Plain-text corpora: the user's text files, or the built-in Wikipedia lead sections."""

import json

from kbert.data.sources import fetch
from kbert.text.utf8 import utf8_lines


def wikipedia_articles():
    """The 10,033 English Wikipedia lead sections of DESIGN.md's corpus, as strings."""
    path = fetch("wikipedia") / "summaries_en-us.json"
    entries = json.loads(path.read_text(encoding="utf-8"))
    return [entry["extract"] for entry in entries.values() if entry.get("extract", "").strip()]


def text_lines(paths):
    """Non-empty lines of UTF-8 text files, in order (a line that is not UTF-8 is an error
    naming it)."""
    for path in paths:
        for line in utf8_lines(path):
            if line.strip():
                yield line.rstrip("\r\n")
