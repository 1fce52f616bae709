"""UTF-8 at kbert's edges: the user's text files, read so that a byte that is not UTF-8 is
named by file, line and column (Python's own error gives only a position in a buffer, "can't
decode byte 0xff in position 8191", and no file), and Python strings that TensorFlow cannot take.

Strict readers (task data, vocabulary corpora) refuse such a file. A pre-training corpus is
read leniently, as Google's `create_pretraining_data.py` reads it (`convert_to_unicode`
decodes with errors ignored): each bad byte sequence becomes U+FFFD, which the tokenizer then
deletes (`kbert.text.tokenizer`, step 2), and one warning per file says where.
"""

import os
import re
import warnings

BOM = "\ufeff"


def _error(source, number, line, error):
    column = error.start + 1
    return ValueError(f"{os.fspath(source)}:{number}: not UTF-8 text (byte 0x"
                      f"{line[error.start]:02x} at column {column}); save the file as UTF-8.")


def decoded_lines(lines, source, lenient=False):
    """Yields `lines` (bytes, or strings passed through) as strings, decoded one at a time
    (a byte order mark dropped from the first), so a large file streams. A line that is not
    UTF-8 raises a ValueError naming `source` (a path, or "<stdin>") and the line, or with
    `lenient` is read with U+FFFD for its bad bytes (one warning for the source, when it is
    done)."""
    bad, first = 0, None
    for number, raw in enumerate(lines, 1):
        line = raw
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                if not lenient:
                    raise _error(source, number, raw, error) from None
                bad, first = bad + 1, first or number
                line = raw.decode("utf-8", errors="replace")
        yield line.removeprefix(BOM) if number == 1 else line
    if bad:
        warnings.warn(f"{os.fspath(source)}: {bad} line(s) are not UTF-8 text (the first: line "
                      f"{first}); their bad bytes are skipped, as Google's "
                      "create_pretraining_data.py skips them.", stacklevel=3)


def utf8_lines(path, lenient=False):
    """Yields the lines of the file at `path` as strings, with their line ends
    (`decoded_lines`)."""
    with open(path, "rb") as f:
        yield from decoded_lines(f, path, lenient)


def read_utf8(path):
    """The whole text of the UTF-8 file at `path` (a byte order mark dropped); a ValueError
    naming the line and column of a byte that is not UTF-8."""
    return "".join(utf8_lines(path))


_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # not surrogateescape's bytes


def without_lone_surrogates(text):
    """`text` (a str, or a list of them, or of lists) as TensorFlow takes it. Python stands
    for bytes that are not UTF-8 with lone surrogates (`sys.argv`, `os.fsdecode`,
    `errors="surrogateescape"`), and JSON may spell one ("\\ud800"); TensorFlow refuses them
    ("Unable to convert element to UTF-8"). The bytes become U+FFFD as a SavedModel reads
    them (`errors="replace"`), other lone surrogates U+FFFD too; kbert's tokenizer then deletes
    U+FFFD, as Google's does."""
    if isinstance(text, (list, tuple)):
        return [without_lone_surrogates(t) for t in text]
    if not isinstance(text, str) or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        text = _LONE_SURROGATE.sub("\ufffd", text)
        return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
