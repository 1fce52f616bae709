"""Entity-level precision, recall and F1 for sequence tagging (CoNLL-2003 NER).

An entity is a chunk (type, first word, last word) read off a tag sequence; a predicted entity
counts only when a gold entity has exactly the same type and boundaries. The chunking rules are
the conlleval ones, which `seqeval` uses in its default (non-strict) mode, so the numbers agree
with `seqeval.metrics.{precision,recall,f1}_score` on the same tags:

  * a tag is "O", or PREFIX-TYPE with PREFIX one of B, I, E, S (IOB1, IOB2/BIO, IOBES); as in
    conlleval, the prefix is the tag's first character and the type what follows the hyphen;
  * a chunk ends before the current tag when the previous tag was E or S; or was B or I and the
    current one is B, S or O; or when the type changes (the previous tag not being O);
  * a chunk starts at the current tag when it is B or S; or is I or E after O, E or S; or when
    the type changes (the current tag not being O);
  * sentences are scored as one sequence with an "O" between them, so no chunk crosses them.

Scores are micro-averaged over all entities; an undefined ratio (no predictions, no gold
entities) is 0.
"""

import collections


def _split_tag(tag):
    """(prefix, type): the first character, and what follows the first hyphen after it
    ("_" when empty), as conlleval reads a tag."""
    tag = str(tag)
    if not tag:
        raise ValueError("Empty tag.")
    return tag[0], tag[1:].split("-", 1)[-1] or "_"


def _ends(prev_prefix, prefix, prev_kind, kind):
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return prev_prefix not in ("O", ".") and prev_kind != kind


def _starts(prev_prefix, prefix, prev_kind, kind):
    if prefix in ("B", "S"):
        return True
    if prefix in ("I", "E") and prev_prefix in ("O", "E", "S"):
        return True
    return prefix not in ("O", ".") and prev_kind != kind


def entity_spans(tags):
    """[(type, first, last)] of the chunks in one tag sequence (indices, inclusive).

    As in conlleval / seqeval, a chunk is emitted whenever the end rule fires, starting where
    the start rule last fired (position 0 if it never did): with well-formed tags this is the
    obvious reading; malformed ones are read exactly as seqeval reads them."""
    spans = []
    prev_prefix, prev_kind, begin = "O", "", 0
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = _split_tag(tag)
        if _ends(prev_prefix, prefix, prev_kind, kind):
            spans.append((prev_kind, begin, index - 1))
        if _starts(prev_prefix, prefix, prev_kind, kind):
            begin = index
        prev_prefix, prev_kind = prefix, kind
    return spans


def _all_entities(sequences):
    """Entities of a list of tag sequences, read as one sequence with an "O" after each
    sentence: (type, first, last) in that joined sequence."""
    if sequences and isinstance(sequences[0], str):
        sequences = [sequences]
    joined = [tag for tags in sequences for tag in list(tags) + ["O"]]
    return set(entity_spans(joined))


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_metrics(gold_tags, predicted_tags) -> dict:
    """Micro `precision`, `recall`, `f1` over entities, with the counts, and the same per type
    under `per_type`. Arguments: lists of tag sequences (one list of tag strings per sentence),
    aligned word for word."""
    if len(gold_tags) != len(predicted_tags):
        raise ValueError(f"{len(gold_tags)} gold sequences but {len(predicted_tags)} predicted.")
    for n, (g, p) in enumerate(zip(gold_tags, predicted_tags)):
        if not isinstance(g, str) and len(g) != len(p):
            raise ValueError(f"Sentence {n}: {len(g)} gold tags but {len(p)} predicted.")
    gold = _all_entities(gold_tags)
    predicted = _all_entities(predicted_tags)
    correct = gold & predicted
    precision, recall, f1 = _prf(len(correct), len(predicted), len(gold))
    per_type = {}
    counts = collections.defaultdict(lambda: [0, 0, 0])
    for name, group in ((0, correct), (1, predicted), (2, gold)):
        for entity in group:
            counts[entity[0]][name] += 1
    for kind in sorted(counts):
        c, p, g = counts[kind]
        tp, tr, tf = _prf(c, p, g)
        per_type[kind] = {"precision": tp, "recall": tr, "f1": tf, "support": g}
    return {"precision": precision, "recall": recall, "f1": f1, "correct": len(correct),
            "predicted": len(predicted), "gold": len(gold), "per_type": per_type}
