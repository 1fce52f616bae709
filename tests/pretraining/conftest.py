"""Fixtures for the pre-training tests: the real uncased BERT vocabulary and Wikipedia text."""

import itertools

import pytest


@pytest.fixture(scope="session")
def tokenizer():
    from kbert.presets import resolve
    from kbert.text import BertTokenizer

    return BertTokenizer.from_pretrained(resolve("minilm_l6_h384_uncased"))


@pytest.fixture(scope="session")
def wiki_documents(tokenizer):
    """The first 600 Wikipedia lead sections, tokenized."""
    from kbert.data.pretraining import tokenize_documents, wikipedia_documents

    return list(tokenize_documents(itertools.islice(wikipedia_documents(), 600), tokenizer))


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """300 Wikipedia lead sections in the one-sentence-per-line format."""
    from kbert.data.pretraining import wikipedia_documents, write_documents

    path = tmp_path_factory.mktemp("corpus") / "wiki.txt"
    write_documents(itertools.islice(wikipedia_documents(), 300), path)
    return path
