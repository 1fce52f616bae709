"""The reference for tagging text longer than one row: Google's run_squad.py windows (its doc
spans and `_check_is_max_context`, as `squad_features` of tests/spans/reference_squad.py
transcribes them) over the words' sub-tokens, each word tagged by the logits of its first
sub-token in the window where that sub-token has the most context.

The windows are `squad_features`' for the joined words as a context after an empty question,
at one more position than a tagging row: [CLS] [SEP] window [SEP] there is [CLS] window [SEP]
here, with the same room. Which word a sub-token begins is `conll_features`' rule
(tests/spans/reference_conll.py) on the unwindowed text.
"""

import numpy as np

from kbert.evaluation.entities import entity_spans
from tests.spans.reference_conll import conll_features, split_words
from tests.spans.reference_squad import SquadExample, squad_features

INPUT_KEYS = ("token_ids", "segment_ids", "padding_mask")


def window_features(word_lists, tokenizer, sequence_length, doc_stride):
    """numpy [W, sequence_length] `token_ids`, `segment_ids`, `padding_mask`, `word_index`
    (the word a first sub-token begins, in its max-context window only; -1 elsewhere) and
    [W] `example_index`, for lists of words."""
    import tensorflow as tf

    rows = {k: [] for k in INPUT_KEYS + ("word_index", "example_index")}
    for n, words in enumerate(word_lists):
        context = " ".join(words)
        windows = squad_features([SquadExample(str(n), "", context)], tokenizer,
                                 sequence_length + 1, doc_stride, max_query_length=1)
        starts = tokenizer.tokenize_with_offsets(tf.constant([context]), "char")[1]
        token_at = {start: t for t, start in enumerate(starts.to_list()[0])}
        word_of = (conll_features([words], tokenizer, len(token_at) + 2)["word_index"][0, 1:]
                   if words else [])
        for w in range(len(windows["token_ids"])):
            length = int(windows["padding_mask"][w].sum()) - 3
            context_ids = windows["token_ids"][w, 2:2 + length].tolist()
            ids = np.zeros(sequence_length, "int32")
            ids[:length + 2] = [tokenizer.cls_token_id] + context_ids + [tokenizer.sep_token_id]
            word_index = np.full(sequence_length, -1, "int32")
            for j in range(length):
                if windows["max_context"][w, 2 + j]:
                    word_index[1 + j] = word_of[token_at[int(windows["token_start"][w, 2 + j])]]
            rows["token_ids"].append(ids)
            rows["segment_ids"].append(np.zeros(sequence_length, "int32"))
            rows["padding_mask"].append((np.arange(sequence_length) < length + 2).astype("int32"))
            rows["word_index"].append(word_index)
            rows["example_index"].append(n)
    return {k: np.asarray(v, "int32") for k, v in rows.items()}


def window_tags(model, tokenizer, word_lists, label_names, sequence_length, doc_stride):
    """Each word's tag, by the model's logits in its max-context window ("O" for none)."""
    features = window_features(word_lists, tokenizer, sequence_length, doc_stride)
    logits = np.asarray(model.predict_on_batch({k: features[k] for k in INPUT_KEYS}))
    tags = [["O"] * len(words) for words in word_lists]
    for w, n in enumerate(features["example_index"]):
        for position in np.nonzero(features["word_index"][w] >= 0)[0]:
            tags[n][features["word_index"][w, position]] = label_names[
                int(logits[w, position].argmax())]
    return tags


def window_entities(model, tokenizer, texts, label_names, sequence_length, doc_stride):
    """Per raw text, its entities [{"text", "type", "start", "end"}] as `tag_entities` of
    tests/spans/reference_conll.py reads them off the tags, the tags from `window_tags`."""
    split = [split_words(text) for text in texts]
    tags = window_tags(model, tokenizer, [words for words, _ in split], label_names,
                       sequence_length, doc_stride)
    return [[{"text": text[spans[first][0]:spans[last][1]], "type": kind,
              "start": spans[first][0], "end": spans[last][1]}
             for kind, first, last in entity_spans(row)]
            for text, (_, spans), row in zip(texts, split, tags)]
