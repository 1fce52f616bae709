"""Pre-training documents: reading corpora and splitting text into sentences.

A *document* is a list of sentence strings. BERT's pre-training data keeps document boundaries
(NotNext segments come from another document) and sentence boundaries (segments are packed from
whole sentences), so everything downstream works on documents.

Two on-disk formats are read (`read_documents`):

* ``"sentences"`` — Google's format for `create_pretraining_data.py`: one sentence per line, a
  blank line between documents.
* ``"text"`` — ordinary prose: each file is one document; lines are joined (blank lines end
  paragraphs) and the text is cut into sentences by `split_sentences`.

``"auto"`` (the default) picks per file from its first 200 lines: the file is in the
``sentences`` format when at least half of the non-blank lines end like a sentence (``. ! ?``
possibly followed by a closing quote or bracket) and at most half of them stand alone between
blank lines (one paragraph per line, as in Project Gutenberg-style text, is prose); otherwise it
is prose.

`split_sentences` is a small rule-based splitter, documented here in full so that its mistakes
are predictable: a sentence ends after ``.``, ``!`` or ``?`` (and any closing quotes/brackets
right after it) when whitespace follows and the next word starts with an upper-case letter, a
digit or an opening quote/bracket; it does not end after a common abbreviation (``Mr.``,
``Dr.``, ``e.g.``, ``U.S.``, ... see `ABBREVIATIONS`) or a single-letter initial (``J. R. R.
Tolkien``). Paragraph breaks (blank lines) always end a sentence. It needs no model and no
download; for the packing it feeds, an occasional wrong split only moves a segment boundary.
"""

import glob
import os
import pathlib
import re

from kbert.text.utf8 import utf8_lines

ABBREVIATIONS = frozenset("""
mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx inc ltd co corp no nos vol pp
gen col lt sgt capt cmdr adm gov sen rep rev hon pres u.s u.k u.n a.m p.m jan feb mar apr jun
jul aug sep sept oct nov dec est fig
""".split())

_CANDIDATE = re.compile(r"""[.!?]+["'\u201d\u2019)\]]*(?=\s+["'\u201c\u2018(\[]?[A-Z0-9])""")
_SENTENCE_END = re.compile(r"""[.!?]["'\u201d\u2019)\]]*$""")


def split_sentences(text):
    """Sentences of `text` (a str), stripped, empty ones dropped. See the module docstring."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = " ".join(paragraph.split())
        start = 0
        for match in _CANDIDATE.finditer(paragraph):
            end = match.end()
            if paragraph[match.start()] == "." and _is_abbreviation(paragraph, match.start()):
                continue
            sentence = paragraph[start:end].strip()
            if sentence:
                sentences.append(sentence)
            start = end
        rest = paragraph[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


def _is_abbreviation(text, dot):
    """Whether the "." at `dot` ends an abbreviation or an initial rather than a sentence."""
    word = text[:dot].rsplit(None, 1)[-1] if text[:dot].strip() else ""
    word = word.lstrip("\"'(\u201c\u2018[")
    if len(word) == 1 and word.isalpha() and word.isupper():
        return True  # an initial: "J. R. R. Tolkien"
    return word.lower() in ABBREVIATIONS


def looks_like_sentence_lines(lines):
    """`"auto"`'s test: most non-blank lines end like a sentence and do not stand alone."""
    lines = [line.strip() for line in lines]
    full = [i for i, line in enumerate(lines) if line]
    if not full:
        return True
    ending = sum(1 for i in full if _SENTENCE_END.search(lines[i]))
    alone = sum(1 for i in full
                if (i == 0 or not lines[i - 1]) and (i + 1 == len(lines) or not lines[i + 1]))
    return ending >= 0.5 * len(full) and alone <= 0.5 * len(full)


def corpus_files(corpus):
    """Files of a corpus given as a file, a directory (its ``*.txt`` files, recursively) or a
    glob pattern (or a list of any of these), sorted for a stable order."""
    if isinstance(corpus, (list, tuple)):
        return [f for c in corpus for f in corpus_files(c)]
    path = pathlib.Path(os.fspath(corpus)).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    elif path.is_file():
        files = [path]
    else:
        files = sorted(pathlib.Path(p) for p in glob.glob(os.fspath(path), recursive=True)
                       if os.path.isfile(p))
    if not files:
        raise FileNotFoundError(f"No corpus files at {corpus!s} (a file, a directory of .txt "
                                "files, or a glob pattern).")
    return files


def read_documents(paths, format="auto"):
    """Yields documents (lists of sentences) from text files, one file at a time, streaming.

    `format`: "sentences" (one sentence per line, blank line between documents), "text" (each
    file one document of prose) or "auto" (decided per file from its first 200 lines).
    Bytes that are not UTF-8 are skipped, with a warning naming the file (`utf8_lines`).
    """
    if format not in ("auto", "sentences", "text"):
        raise ValueError(f"format must be 'auto', 'sentences' or 'text', got {format!r}.")
    if isinstance(paths, (str, os.PathLike)):
        paths = corpus_files(paths)
    for path in paths:
        file_format = format
        if file_format == "auto":
            head = [line for _, line in zip(range(200), utf8_lines(path, lenient=True))]
            file_format = "sentences" if looks_like_sentence_lines(head) else "text"
        if file_format == "text":
            document = split_sentences("".join(utf8_lines(path, lenient=True)))
            if document:
                yield document
            continue
        document = []
        for line in utf8_lines(path, lenient=True):
            line = line.strip()
            if line:
                document.append(line)
            elif document:
                yield document
                document = []
        if document:
            yield document


def wikipedia_documents():
    """The built-in corpus: DESIGN.md's 10,033 Wikipedia lead sections, sentence-split."""
    from kbert.data.corpus import wikipedia_articles

    for article in wikipedia_articles():
        document = split_sentences(article)
        if document:
            yield document


def corpus_documents(corpus=None, format="auto"):
    """Documents of `corpus` (see `corpus_files`), or of the built-in Wikipedia text when None."""
    if corpus is None or corpus == "wikipedia":
        return wikipedia_documents()
    return read_documents(corpus_files(corpus), format=format)


def write_documents(documents, path):
    """Writes documents in the "sentences" format (the inverse of `read_documents`)."""
    with open(path, "w", encoding="utf-8") as f:
        for document in documents:
            for sentence in document:
                f.write(sentence.replace("\n", " ").strip() + "\n")
            f.write("\n")


def tokenize_documents(documents, tokenizer, batch_sentences=512):
    """Yields documents as lists of token-id arrays (int32, no special tokens), streaming:
    sentences of consecutive documents are tokenized together in batches of about
    `batch_sentences` through the in-graph `tokenizer`. Sentences that tokenize to nothing are
    dropped, and so are documents left empty."""
    import tensorflow as tf

    tokenize = tf.function(lambda text: tokenizer(text), reduce_retracing=True)
    pending, count = [], 0

    def flush():
        sentences = [s for d in pending for s in d]
        ragged = tokenize(tf.constant(sentences)) if sentences else None
        values, splits = (ragged.flat_values.numpy(), ragged.row_splits.numpy()) if sentences \
            else (None, None)
        out, k = [], 0
        for d in pending:
            doc = []
            for _ in d:
                ids = values[splits[k]:splits[k + 1]]
                k += 1
                if len(ids):
                    doc.append(ids)
            if doc:
                out.append(doc)
        return out

    for document in documents:
        pending.append(list(document))
        count += len(document)
        if count >= batch_sentences:
            yield from flush()
            pending, count = [], 0
    if pending:
        yield from flush()
