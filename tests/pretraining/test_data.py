"""Documents, sentence splitting, segment packing and NSP labels."""

import random

import numpy as np
import pytest

from kbert.data.pretraining import pairs
from kbert.data.pretraining.documents import read_documents, split_sentences


def test_split_sentences_rules():
    text = ('J. R. R. Tolkien wrote it. Mr. Smith went to Washington, D.C. in 1990! '
            '"Why?" he asked. The U.S. Army is big.\n\nIt cost $3.5 million. done')
    assert split_sentences(text) == [
        "J. R. R. Tolkien wrote it.", "Mr. Smith went to Washington, D.C. in 1990!",
        '"Why?" he asked.', "The U.S. Army is big.", "It cost $3.5 million. done"]


def test_read_documents_formats(tmp_path):
    (tmp_path / "lines.txt").write_text("First one.\nSecond one.\n\nOther doc.\nAgain.\n")
    (tmp_path / "prose.txt").write_text(
        "A paragraph that is\nwrapped over lines. It has\ntwo sentences.\n\n"
        "Another paragraph\nhere.\n")
    assert list(read_documents(tmp_path / "lines.txt")) == [
        ["First one.", "Second one."], ["Other doc.", "Again."]]
    assert list(read_documents(tmp_path / "prose.txt")) == [
        ["A paragraph that is wrapped over lines.", "It has two sentences.",
         "Another paragraph here."]]
    assert len(list(read_documents(tmp_path))) == 3  # a folder: its .txt files


def synthetic_documents(n_docs=200, seed=0, sentence_len=(3, 30), sentences=(1, 12)):
    """Token ids encode (document, sentence, position) so pairs can be traced back."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        docs.append([np.array([1000 + d] * rng.randint(*sentence_len), np.int32)
                     for _ in range(rng.randint(*sentences))])
    return docs


@pytest.mark.parametrize("length", [16, 64, 128])
def test_packing_never_exceeds_length(length):
    docs = synthetic_documents(sentence_len=(1, 90))
    examples = list(pairs.examples(docs, length, cls_id=101, sep_id=102, seed=1))
    assert examples
    lengths = []
    for e in examples:
        n = int(e["padding_mask"].sum())
        lengths.append(n)
        ids, seg = e["token_ids"][:n], e["segment_ids"][:n]
        assert n <= length and e["token_ids"].shape == (length,)
        assert ids[0] == 101 and ids[-1] == 102 and (e["token_ids"][n:] == 0).all()
        seps = np.flatnonzero(ids == 102)
        assert len(seps) == 2 and (seg[:seps[0] + 1] == 0).all() and (seg[seps[0] + 1:] == 1).all()
    if length == 128:  # most pairs fill the length; ~10% aim at a shorter random target
        full = np.mean(np.array(lengths) >= length - 2)
        assert 0.6 < full < 0.97


def test_nsp_labels_balanced_and_not_next_from_other_document():
    docs = synthetic_documents(n_docs=400, seed=3)
    rng = random.Random(0)
    out = list(pairs.corpus_pairs(docs, 64, rng))
    labels = np.array([label for _, _, label in out])
    assert abs(labels.mean() - 0.5) < 0.03
    rng = random.Random(0)
    for a, b, label in pairs.corpus_pairs(docs, 64, rng):
        same = set(a) == set(b)  # every token of a document carries its id
        assert same == (label == pairs.IS_NEXT)
    # Google's rule (no balancing) on the same corpus: fewer IsNext.
    google = pairs.nsp_balance(docs, 64, balance_nsp=False)
    assert google < pairs.nsp_balance(docs, 64) + 0.01


def test_nsp_balance_on_wikipedia(wiki_documents):
    assert abs(pairs.nsp_balance(wiki_documents, 128) - 0.5) < 0.02
    assert pairs.nsp_balance(wiki_documents, 128, balance_nsp=False) < 0.45


def test_unused_sentences_are_put_back():
    # Short sentences, no truncation: every sentence of a document appears exactly once in
    # one of its own pairs (as A, or as an IsNext B).
    rng = random.Random(5)
    docs = [[np.array([d * 100 + s] * 3, np.int32) for s in range(rng.randint(2, 9))]
            for d in range(50)]
    seen = []
    for index in range(len(docs)):
        for a, b, label in pairs.document_pairs(docs, index, 61, rng, short_seq_prob=0.0):
            seen += sorted(set(a))
            if label == pairs.IS_NEXT:
                seen += sorted(set(b))
    assert sorted(seen) == sorted(d * 100 + s for d, doc in enumerate(docs)
                                  for s in range(len(doc)))
