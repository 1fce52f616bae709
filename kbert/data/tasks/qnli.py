"""GLUE's QNLI construction applied to SQuAD v1.1: question + sentence, label = holds the answer."""

import json
import os
import pathlib
import random
import re
import zlib

from kbert.data.tasks.common import TaskData


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def sentence_spans(text):
    """[start, end) character spans of the sentences of `text` (a rule-based splitter: a
    sentence ends at . ! or ? followed by space and an upper-case letter or digit)."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        end = match.start()
        # keep closing quotes/brackets with the sentence they end
        while end < len(text) and text[end] in "\"')]":
            end += 1
        if text[start:end].strip():
            spans.append((start, end))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def squad_qnli_examples(path):
    """QNLI-style pairs from a SQuAD v1.1 JSON file, as GLUE built QNLI: for each question, the
    context sentence that holds the (first) answer span is a positive pair (label 1) and one
    other sentence of the same paragraph, holding none of the answers, a negative (label 0,
    chosen by a generator seeded with the question id). Questions whose answer crosses a
    sentence boundary, or whose paragraph has no usable other sentence, are skipped.

    Returns a list of (title, ((question, sentence), label)).
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    pairs = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            spans = sentence_spans(context)
            for qa in paragraph["qas"]:
                if not qa.get("answers"):
                    continue
                answer = qa["answers"][0]
                start = answer["answer_start"]
                end = start + len(answer["text"])
                holding = [s for s in spans if s[0] <= start and end <= s[1]]
                if not holding:
                    continue
                texts = {a["text"] for a in qa["answers"]}
                others = [s for s in spans if s != holding[0] and
                          not any(t in context[s[0]:s[1]] for t in texts)]
                if not others:
                    continue
                negative = random.Random(qa["id"]).choice(others)
                question = qa["question"].strip()
                for (a, b), label in ((holding[0], 1), (negative, 0)):
                    pairs.append((article["title"], ((question, context[a:b].strip()), label)))
    return pairs


def qnli_task(directory=None):
    """QNLI from SQuAD v1.1: train pairs from train-v1.1.json; SQuAD's dev articles split by
    CRC-32 of the title into dev (even) and test (odd). Labels: 1 = the sentence holds the answer.
    """
    if directory is None:
        from kbert.data.sources import fetch

        directory = fetch("squad")
    directory = pathlib.Path(directory)
    train = [ex for _, ex in squad_qnli_examples(directory / "train-v1.1.json")]
    dev, test = [], []
    for title, ex in squad_qnli_examples(directory / "dev-v1.1.json"):
        (dev if zlib.crc32(title.encode("utf-8")) % 2 == 0 else test).append(ex)
    return TaskData("qnli", "classification", 2, {"train": train, "dev": dev, "test": test},
                    ("not_entailment", "entailment"),
                    "QNLI-style pairs from SQuAD v1.1 (question, sentence holds the answer)")
