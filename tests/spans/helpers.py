"""A small vocabulary and tiny models for the span and tagging tests."""

import json

from kbert.config import BertConfig
from kbert.text import BertTokenizer

WORDS = ("the a of in to was is who what when where did paris france london city capital "
         "river seine flows through peter smith went visited born year 1990 ##s . , ? ' s "
         "john lives berlin germany museum art opened cat dog sat on mat un ##believ ##able "
         "tower eiffel built").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def tiny_config(vocab_size=len(VOCAB), num_layers=2):
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_layers=num_layers, num_heads=4,
                      intermediate_size=64, max_position_embeddings=128)


def squad_json(path, articles):
    """Writes a SQuAD file: articles = [(title, [(context, [(id, question, answers)])])],
    answers = [(text, start)] (start None: found with str.find)."""
    data = []
    for title, paragraphs in articles:
        ps = []
        for context, qas in paragraphs:
            ps.append({"context": context, "qas": [
                {"id": qid, "question": q,
                 "answers": [{"text": t, "answer_start": context.find(t) if s is None else s}
                             for t, s in answers]}
                for qid, q, answers in qas]})
        data.append({"title": title, "paragraphs": ps})
    path.write_text(json.dumps({"version": "1.1", "data": data}))
    return path
