"""Python references for the CoNLL graph ops, moved here unchanged from the code kbert used
before them (`kbert/data/conll.py`'s features, `kbert/training/finetune_conll.py`'s word split and
tagger): `conll_features` (words → word-piece features, labels on first sub-tokens),
`decode_tags`, `split_words` (the regex word split) and `tag_entities` (features → logits → tags
→ entities). `kbert.text.token_preprocessor`, `word_split` and `entity_decoding` are tested
against them."""

import bisect
import re

import numpy as np

from kbert.data.conll import CONLL2003_LABELS, TaggedSentence
from kbert.data.tasks import DataError

_WORD = re.compile(r"\w+(?:[-'’.&]\w+)*|[^\w\s]")


def split_words(text):
    """(words, [(start, end)]) of raw text, CoNLL-style: runs of word characters (joined by
    inner hyphens, apostrophes, periods, ampersands) and single punctuation marks."""
    matches = list(_WORD.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


def tag_entities(model, tokenizer, texts, label_names=None, sequence_length=128):
    """Named entities in raw text (a string or a list of them). Returns per text a list of
    {"text", "type", "start", "end"} (character span in the text), and with a list input a
    list of such lists. Words beyond `sequence_length` sub-tokens are tagged O."""
    from kbert.evaluation.entities import entity_spans

    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    label_names = label_names or getattr(model, "label_names", None)
    if not label_names:
        raise ValueError("label_names are needed (the model was built without them).")
    results, split = [], [split_words(t) for t in texts]
    nonempty = [n for n, (words, _) in enumerate(split) if words]
    tags = {}
    if nonempty:
        features = conll_features([split[n][0] for n in nonempty], tokenizer, sequence_length,
                                  label_names)
        logits = np.asarray(model.predict_on_batch(
            {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}), "float32")
        decoded = decode_tags(logits, features["word_index"],
                              [len(split[n][0]) for n in nonempty], label_names)
        tags = dict(zip(nonempty, decoded))
    for n, text in enumerate(texts):
        entities = []
        for kind, first, last in entity_spans(tags.get(n, [])):
            start, end = split[n][1][first][0], split[n][1][last][1]
            entities.append({"text": text[start:end], "type": kind, "start": start, "end": end})
        results.append(entities)
    return results[0] if single else results





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
