"""CoNLL-2003 NER: the column-file reader, tag schemes, and word → sub-token features.

File format: one token per line, columns separated by spaces (word first, NER tag last; the
POS and chunk columns in between are ignored), a blank line between sentences, and
"-DOCSTART-" lines between documents (skipped, they are not sentences). Tags are IOB1 in the
original shared-task files and IOB2 (BIO) in most redistributed copies; `read_conll` detects
which and returns IOB2 (IOB1 → IOB2: an I-X that begins a chunk becomes B-X). A file whose
tags have no B-/I- prefix (parts of speech, say) is read as "plain": each tagged word is a
chunk of its own, X → B-X, so the scores count words.

The word → word-piece alignment (only a word's first sub-token carries its label) and the
decoding back to entities are graph ops (`kbert.text.token_preprocessor`,
`kbert.text.entity_decoding`), shared by training, evaluation, `kbert predict` and the export.
"""

import dataclasses
import os
import pathlib

from kbert.data.tasks import DataError, hold_out
from kbert.text.utf8 import utf8_lines

CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
                    "I-MISC")
SCHEMES = ("auto", "iob1", "iob2", "plain")


@dataclasses.dataclass
class TaggedSentence:
    words: list
    tags: list
    source: str = ""  # "path:line" of the sentence's first word


def _is_chunk_tag(tag):
    return len(tag) > 2 and tag[0] in "BI" and tag[1] == "-"


def starts_chunk_as_inside(tags):
    """Indices of I-X tags that begin a chunk (after O, another type or the sentence start):
    legal in IOB1, never in IOB2."""
    found = []
    previous = "O"
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            found.append(i)
        previous = tag
    return found


def iob1_to_iob2(tags):
    """IOB1 (B- only between two adjacent chunks of one type) → IOB2 (every chunk starts with
    B-)."""
    tags = list(tags)
    for i in starts_chunk_as_inside(tags):
        tags[i] = "B-" + tags[i][2:]
    return tags


def detect_scheme(sentences):
    """"iob1" if some chunk starts with I-, else "iob2"."""
    return "iob1" if any(starts_chunk_as_inside(s.tags) for s in sentences) else "iob2"


def read_conll(path, scheme="auto"):
    """Sentences of a CoNLL-2003 file, tags in IOB2. `scheme`: "iob1", "iob2", "plain" (tags
    without B-/I-: X → B-X) or "auto" (plain if no tag has a B-/I- prefix, else IOB1 if any
    chunk starts with I-, else IOB2). Returns (sentences, scheme found).

    A file declared "iob2" that has a chunk starting with I- raises `DataError`; so do a line
    without a tag column and, in an IOB file, a tag that is not O / B-X / I-X
    ("path:line: ...").

    Examples:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "pos.conll"
        >>> _ = path.write_text("The DT\\ncat NN\\nsat VBD\\n")
        >>> sentences, scheme = read_conll(path)
        >>> scheme, sentences[0].tags
        ('plain', ['B-DT', 'B-NN', 'B-VBD'])
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}.")
    path = os.fspath(path)
    sentences, words, tags, first = [], [], [], None
    first_plain = first_chunk = None  # (line, tag) of the first tag of each form

    def flush():
        nonlocal words, tags, first
        if words:
            sentences.append(TaggedSentence(words, tags, f"{path}:{first}"))
        words, tags, first = [], [], None

    for number, line in enumerate(utf8_lines(path), 1):
        line = line.strip()
        if not line:
            flush()
            continue
        columns = line.split()
        if columns[0] == "-DOCSTART-":
            flush()
            continue
        if len(columns) < 2:
            raise DataError(f"{path}:{number}: expected 'word ... tag', got {line!r}.")
        tag = columns[-1]
        if _is_chunk_tag(tag):
            first_chunk = first_chunk or (number, tag)
        elif tag != "O":
            first_plain = first_plain or (number, tag)
        if first is None:
            first = number
        words.append(columns[0])
        tags.append(columns[-1])
    flush()
    if not sentences:
        raise DataError(f"{path}: no sentences.")
    if scheme == "plain" or (scheme == "auto" and first_plain and not first_chunk):
        for s in sentences:
            s.tags = [t if t == "O" else "B-" + t for t in s.tags]
        return sentences, "plain"
    if first_plain:
        line, tag = first_plain
        raise DataError(f"{path}:{line}: tag {tag!r} is not O, B-TYPE or I-TYPE"
                        + (f", as the file's other tags are (line {first_chunk[0]}: "
                           f"{first_chunk[1]!r})." if first_chunk else "."))
    found = detect_scheme(sentences)
    if scheme == "iob2" and found == "iob1":
        bad = next(s for s in sentences if starts_chunk_as_inside(s.tags))
        raise DataError(f"{bad.source}: a chunk starts with an I- tag, which IOB2 forbids "
                        "(read it with scheme='iob1' or 'auto').")
    if scheme == "iob1" or found == "iob1":
        for s in sentences:
            s.tags = iob1_to_iob2(s.tags)
    return sentences, (found if scheme == "auto" else scheme)


def conll2003(directory=None, scheme="auto"):
    """{"train", "dev", "test"} → sentences of CoNLL-2003 English (fetched when `directory` is
    None; reads train.txt, valid.txt, test.txt)."""
    if directory is None:
        from kbert.data.sources import fetch

        directory = fetch("conll2003")
    directory = pathlib.Path(directory)
    files = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}
    return {split: read_conll(directory / name, scheme)[0] for split, name in files.items()}


def conll_files(train, dev=None, test=None, scheme="auto", seed=0):
    """{"train", "dev"[, "test"]} → sentences of one's own CoNLL-format files (`read_conll`);
    without `dev`, a seeded tenth of `train` is held out (`hold_out`). A tag of the dev or
    test file that the training file lacks is refused, naming its line.

    Args:
        train: the training file.
        dev: the validation file, or None.
        test: the test file, or None.
        scheme: as `read_conll`.
        seed: the seed of the held-out tenth.

    Returns:
        The splits, as lists of `TaggedSentence`.

    Examples:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.conll"
        >>> _ = path.write_text("-DOCSTART- O\\n\\n" + "Ann B-PER\\nsings O\\n\\n" * 10)
        >>> splits = conll_files(path)
        >>> len(splits["train"]), len(splits["dev"]), splits["dev"][0].tags
        (9, 1, ['B-PER', 'O'])
    """
    splits = {}
    splits["train"], found = read_conll(train, scheme)
    tags = {t for s in splits["train"] for t in s.tags}
    for split, path in (("dev", dev), ("test", test)):
        if path is None:
            continue
        splits[split] = read_conll(path, "plain" if found == "plain" else scheme)[0]
        for sentence in splits[split]:
            for n, tag in enumerate(sentence.tags):
                if tag not in tags:
                    file, first = sentence.source.rsplit(":", 1)
                    raise DataError(f"{file}:{int(first) + n}: tag {tag!r} is not in the "
                                    f"training file's tags {sorted(tags)}.")
    if dev is None:
        splits["train"], splits["dev"] = hold_out(splits["train"], seed)
    return splits
