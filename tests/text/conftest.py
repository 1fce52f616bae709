"""Shared fixtures for the text-pipeline tests: real text, the real uncased vocabulary, and a
cased vocabulary trained here with kbert's own trainer (no cased vocabulary ships)."""

import json
import random
import re

import pytest

from kbert.data.sources import fetch


def _sentences(paragraph):
    return [s for s in re.split(r"(?<=[.!?])\s+", paragraph) if s]


@pytest.fixture(scope="session")
def wiki_articles():
    data = json.loads((fetch("wikipedia") / "summaries_en-us.json").read_text(encoding="utf-8"))
    return [v["extract"] for v in data.values()]


@pytest.fixture(scope="session")
def real_sentences(wiki_articles):
    """About 5,000 real sentences: SQuAD questions and context sentences, CoNLL-2003 sentences,
    Wikipedia sentences (held out from the cased vocabulary's training articles)."""
    rng = random.Random(1234)
    squad = json.loads((fetch("squad") / "dev-v1.1.json").read_text(encoding="utf-8"))
    questions, contexts = [], []
    for article in squad["data"]:
        for para in article["paragraphs"]:
            contexts.extend(_sentences(para["context"]))
            questions.extend(q["question"] for q in para["qas"])
    conll, words = [], []
    for line in (fetch("conll2003") / "valid.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                conll.append(" ".join(words))
            words = []
        else:
            words.append(line.split(" ")[0])
    wiki = [s for a in wiki_articles[5000:5600] for s in _sentences(a)]
    out = (rng.sample(questions, 1200) + rng.sample(contexts, 1300) + rng.sample(conll, 1200)
           + rng.sample(wiki, 1300))
    return out


@pytest.fixture(scope="session")
def uncased_vocab():
    from kbert.text.tokenizer_files import load_vocabulary

    return load_vocabulary(fetch("minilm") / "vocab.txt")


@pytest.fixture(scope="session")
def cased_vocab(wiki_articles, tmp_path_factory):
    """A 5,000-token cased WordPiece vocabulary learned from 1,500 Wikipedia articles."""
    from kbert.text.vocab import train_vocabulary

    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    tokens = train_vocabulary(wiki_articles[:1500], vocab_size=5000, lowercase=False,
                              output_path=path)
    return tokens, path
