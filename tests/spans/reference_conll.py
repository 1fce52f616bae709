"""Python references for the CoNLL graph ops (moved from the pre-redesign driver,
`kbert/training/finetune_conll.py`, unchanged): `split_words` (the regex word split) and
`tag_entities` (numpy features → logits → tags → entities). Tests compare
`kbert.text.word_split` and `kbert.text.entity_decoding` with them."""

import re

import numpy as np

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
    from kbert.data.conll import conll_features, decode_tags
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


