"""Segment pairs for BERT pre-training: sentence packing and next-sentence labels.

The algorithm is the one of the paper's data (Google's `create_pretraining_data.py`), written
afresh here. For every document, walking its sentences in order:

1. A *target length* is drawn: `max_tokens = sequence_length - 3` (room for `[CLS]`, `[SEP]`,
   `[SEP]`), and with probability `short_seq_prob` (0.1) a random length in [2, max_tokens]
   instead, so the model also sees short inputs (pre-training/fine-tuning length mismatch).
2. Sentences are gathered into a *chunk* until the chunk reaches the target or the document ends.
3. The chunk is cut after a random number of its sentences (at least one): that is segment A.
4. NSP: with probability 0.5 (and always when the chunk is a single sentence) B is *NotNext*:
   sentences from a random point of another, randomly chosen document, up to the remaining
   target length; the chunk's sentences after A were not used, so the walk steps back over them
   and they start the next chunk ("putting unused segments back"). Otherwise B is *IsNext*: the
   rest of the chunk.
5. The pair is truncated to `max_tokens`, one token at a time from the longer segment, from its
   front or its back at random (so the model does not learn that segments end at sentences).

Labels follow Google's data: 0 = IsNext, 1 = NotNext.

A chunk of one sentence can only make a NotNext pair (Google's code does the same), and every
NotNext pair puts sentences back that often form such a chunk; on a corpus of short documents
(the Wikipedia lead sections: 3.6 sentences each) Google's rule gives only ~37% IsNext pairs.
With `balance_nsp=True` (the default) a chunk of two or more sentences is made IsNext whenever
the NotNext pairs produced so far outnumber the IsNext ones, and decided by a fair coin
otherwise; this restores the paper's 50/50 and changes
nothing on corpora of long documents, where the counts stay level. `balance_nsp=False` is
Google's rule exactly. `nsp_balance` measures the share.
"""

import random

import numpy as np

IS_NEXT, NOT_NEXT = 0, 1


def target_length(max_tokens, short_seq_prob, rng):
    """Step 1: `max_tokens`, or with probability `short_seq_prob` a random length in
    [2, max_tokens]."""
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_tokens)
    return max_tokens


def truncate_pair(tokens_a, tokens_b, max_tokens, rng):
    """Step 5, in place: removes tokens from the longer list (front or back at random) until
    `len(a) + len(b) <= max_tokens`."""
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def document_pairs(documents, index, max_tokens, rng, short_seq_prob=0.1, nsp=True,
                   counts=None):
    """Yields `(tokens_a, tokens_b, label)` for `documents[index]`; each document is a list of
    sentences, each sentence a sequence of token ids. `nsp=False` gives IsNext-style
    continuous pairs only (the "No NSP" ablation still packs two segments). `counts`, a list
    `[is_next, not_next]` updated in place, turns on `balance_nsp` (module docstring)."""
    document = documents[index]
    target = target_length(max_tokens, short_seq_prob, rng)
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
                tokens_b = []
                if not nsp or len(documents) < 2:
                    random_next = False
                elif len(chunk) == 1:
                    random_next = True
                elif counts is not None and counts[NOT_NEXT] > counts[IS_NEXT]:
                    random_next = False
                else:
                    random_next = rng.random() < 0.5
                if random_next:
                    b_target = max(1, target - len(tokens_a))
                    other = index
                    while other == index:
                        other = rng.randrange(len(documents))
                    other_doc = documents[other]
                    for sentence in other_doc[rng.randrange(len(other_doc)):]:
                        tokens_b.extend(sentence)
                        if len(tokens_b) >= b_target:
                            break
                    i -= len(chunk) - a_end  # put the unused sentences back
                else:
                    tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
                truncate_pair(tokens_a, tokens_b, max_tokens, rng)
                if tokens_a:
                    label = NOT_NEXT if random_next else IS_NEXT
                    if counts is not None:
                        counts[label] += 1
                    yield tokens_a, tokens_b, label
            chunk, length = [], 0
            target = target_length(max_tokens, short_seq_prob, rng)
        i += 1


def corpus_pairs(documents, sequence_length, rng, short_seq_prob=0.1, nsp=True,
                 balance_nsp=True):
    """Yields the pairs of every document, documents in a shuffled order."""
    if sequence_length < 5:
        raise ValueError(f"sequence_length must be at least 5, got {sequence_length}.")
    order = list(range(len(documents)))
    rng.shuffle(order)
    counts = [0, 0] if balance_nsp else None
    for index in order:
        yield from document_pairs(documents, index, sequence_length - 3, rng, short_seq_prob,
                                  nsp, counts)


def pack_pair(tokens_a, tokens_b, sequence_length, cls_id, sep_id, pad_id=0):
    """`[CLS] A [SEP] B [SEP]` (or `[CLS] A [SEP]` when B is empty), padded: a dict of int32
    numpy arrays `token_ids`, `segment_ids`, `padding_mask` of length `sequence_length`."""
    ids = [cls_id, *tokens_a, sep_id]
    segments = [0] * len(ids)
    if tokens_b:
        ids += [*tokens_b, sep_id]
        segments += [1] * (len(tokens_b) + 1)
    if len(ids) > sequence_length:
        raise ValueError(f"Pair of {len(ids)} tokens exceeds sequence_length={sequence_length}.")
    out = {
        "token_ids": np.full(sequence_length, pad_id, np.int32),
        "segment_ids": np.zeros(sequence_length, np.int32),
        "padding_mask": np.zeros(sequence_length, np.int32),
    }
    out["token_ids"][:len(ids)] = ids
    out["segment_ids"][:len(ids)] = segments
    out["padding_mask"][:len(ids)] = 1
    return out


def examples(documents, sequence_length, cls_id, sep_id, pad_id=0, seed=0, short_seq_prob=0.1,
             nsp=True, balance_nsp=True):
    """Yields packed examples (`pack_pair`'s dict plus `next_sentence_label`) over the corpus
    once, in a seed-dependent order of documents."""
    rng = random.Random(seed)
    for a, b, label in corpus_pairs(documents, sequence_length, rng, short_seq_prob, nsp,
                                    balance_nsp):
        example = pack_pair(a, b, sequence_length, cls_id, sep_id, pad_id)
        example["next_sentence_label"] = np.int32(label)
        yield example


def nsp_balance(documents, sequence_length, seed=0, short_seq_prob=0.1, balance_nsp=True):
    """The fraction of IsNext pairs one pass over `documents` produces."""
    labels = [label for _, _, label in corpus_pairs(documents, sequence_length,
                                                    random.Random(seed), short_seq_prob,
                                                    balance_nsp=balance_nsp)]
    return labels.count(IS_NEXT) / max(len(labels), 1)
