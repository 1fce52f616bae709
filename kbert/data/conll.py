"""CoNLL-2003 NER: the column-file reader, tag schemes, and word → sub-token features.

File format: one token per line, columns separated by spaces (word first, NER tag last; the
POS and chunk columns in between are ignored), a blank line between sentences, and
"-DOCSTART-" lines between documents (skipped, they are not sentences). Tags are IOB1 in the
original shared-task files and IOB2 (BIO) in most redistributed copies; `read_conll` detects
which and returns IOB2 (IOB1 → IOB2: an I-X that begins a chunk becomes B-X).

Features (`conll_features`): each sentence is the words joined by single spaces, tokenized
once with character offsets, and every sub-token is mapped back to its word. Only the first
sub-token of a word carries the word's label; the other sub-tokens, [CLS], [SEP] and padding
get weight 0 (ignored by the loss and the metrics). A sentence longer than the sequence is cut
at `sequence_length - 2` sub-tokens: its remaining words get no prediction, which
`decode_tags` turns into "O" (so they still count against recall).
"""

import bisect
import dataclasses
import os
import pathlib

import numpy as np

from kbert.data.tasks import DataError

CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
                    "I-MISC")
SCHEMES = ("auto", "iob1", "iob2")


@dataclasses.dataclass
class TaggedSentence:
    words: list
    tags: list
    source: str = ""  # "path:line" of the sentence's first word


def _check_tag(tag, where):
    if tag != "O" and not (len(tag) > 2 and tag[0] in "BI" and tag[1] == "-"):
        raise DataError(f"{where}: tag {tag!r} is not O, B-TYPE or I-TYPE.")


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
    """Sentences of a CoNLL-2003 file, tags in IOB2. `scheme`: "iob1", "iob2" or "auto"
    (detected: IOB1 if any chunk starts with I-). Returns (sentences, scheme found).

    A file declared "iob2" that has a chunk starting with I- raises `DataError`; so do a line
    without a tag column and a tag that is not O / B-X / I-X ("path:line: ...")."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}.")
    path = os.fspath(path)
    sentences, words, tags, first = [], [], [], None

    def flush():
        nonlocal words, tags, first
        if words:
            sentences.append(TaggedSentence(words, tags, f"{path}:{first}"))
        words, tags, first = [], [], None

    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
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
            _check_tag(columns[-1], f"{path}:{number}")
            if first is None:
                first = number
            words.append(columns[0])
            tags.append(columns[-1])
    flush()
    if not sentences:
        raise DataError(f"{path}: no sentences.")
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


# ------------------------------------------------------------------------------ features

def word_spans(words):
    """(text, [(start, end)]): the words joined by single spaces, with each word's span."""
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + 1
    return " ".join(words), spans


def conll_features(sentences, tokenizer, sequence_length=128, label_names=CONLL2003_LABELS):
    """Packed features for `sentences` (TaggedSentence, or lists of words: then no labels).

    Returns a dict of numpy arrays [count, sequence_length]: `token_ids`, `segment_ids`,
    `padding_mask`, `labels` (the word's label id on first sub-tokens, 0 elsewhere),
    `label_weights` (1.0 on first sub-tokens, 0.0 elsewhere), `word_index` (the word each
    first sub-token starts, -1 elsewhere); and `truncated_words` (int, words cut off).
    """
    import tensorflow as tf

    if sequence_length < 3:
        raise ValueError(f"sequence_length must be at least 3, got {sequence_length}.")
    label_index = {name: i for i, name in enumerate(label_names)}
    texts, spans_all = [], []
    for n, s in enumerate(sentences):
        words = s.words if isinstance(s, TaggedSentence) else list(s)
        if not words:
            raise DataError(f"Sentence {n} has no words.")
        text, spans = word_spans(words)
        texts.append(text)
        spans_all.append(spans)
    count = len(texts)
    ids, starts, _ = tokenizer.tokenize_with_offsets(tf.constant(texts, tf.string), "char")
    ids, starts = ids.to_list(), starts.to_list()
    out = {k: np.zeros((count, sequence_length), "int32")
           for k in ("token_ids", "segment_ids", "padding_mask", "labels")}
    out["label_weights"] = np.zeros((count, sequence_length), "float32")
    out["word_index"] = np.full((count, sequence_length), -1, "int32")
    truncated = 0
    for n in range(count):
        keep = min(len(ids[n]), sequence_length - 2)
        row = [tokenizer.cls_token_id] + ids[n][:keep] + [tokenizer.sep_token_id]
        out["token_ids"][n, :len(row)] = row
        out["padding_mask"][n, :len(row)] = 1
        word_starts = [start for start, _ in spans_all[n]]
        seen = set()
        tags = sentences[n].tags if isinstance(sentences[n], TaggedSentence) else None
        for position, start in enumerate(starts[n][:keep], 1):
            w = bisect.bisect_right(word_starts, start) - 1  # the word holding the token
            if w < 0 or w in seen:
                continue
            seen.add(w)
            out["word_index"][n, position] = w
            out["label_weights"][n, position] = 1.0
            if tags is not None:
                if tags[w] not in label_index:
                    where = sentences[n].source or f"sentence {n}"
                    raise DataError(f"{where}: tag {tags[w]!r} is not one of {list(label_names)}.")
                out["labels"][n, position] = label_index[tags[w]]
        truncated += len(spans_all[n]) - len({w for w in seen})
    out["truncated_words"] = truncated
    return out


def decode_tags(logits, word_index, num_words, label_names=CONLL2003_LABELS):
    """Word-level tags from token logits [count, seq, classes]: each word takes the argmax at its
    first sub-token; words with no sub-token in the window get "O"."""
    predictions = np.asarray(logits).argmax(-1)
    sentences = []
    for n, length in enumerate(num_words):
        tags = ["O"] * length
        for position in np.nonzero(word_index[n] >= 0)[0]:
            tags[word_index[n, position]] = label_names[predictions[n, position]]
        sentences.append(tags)
    return sentences


def tagging_dataset(features, batch_size=32, shuffle=False, repeat=False, seed=0, bucket=False):
    """tf.data of (inputs, labels, sample weights) batches, each cut to its longest sequence.
    `bucket=True` batches sentences of similar length together (training only: it reorders)."""
    import tensorflow as tf

    inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    dataset = tf.data.Dataset.from_tensor_slices(
        (inputs, features["labels"], features["label_weights"]))
    if shuffle:
        dataset = dataset.shuffle(len(features["labels"]), seed=seed,
                                  reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    if bucket:
        lengths = features["padding_mask"].sum(-1)
        edges = sorted({int(e) + 1 for e in np.quantile(lengths, np.linspace(0, 1, 9)[1:-1])})
        dataset = dataset.bucket_by_sequence_length(
            lambda x, y, w: tf.reduce_sum(x["padding_mask"]), edges,
            [batch_size] * (len(edges) + 1))
    else:
        dataset = dataset.batch(batch_size)

    def cut(x, y, w):
        longest = tf.reduce_max(tf.reduce_sum(x["padding_mask"], -1))
        return {k: v[:, :longest] for k, v in x.items()}, y[:, :longest], w[:, :longest]

    return dataset.map(cut, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
