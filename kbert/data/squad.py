"""SQuAD v1.1 / v2.0: the JSON reader, windowed question+context features, and the decoding
of start/end logits back into answer text.

Reading (`read_squad`). Every question becomes a `SquadExample` (id, question, context, gold
answers as (text, char start), is_impossible). A bad file raises `DataError` naming the file,
the line and column of the question's id, and the id: an empty context or question, an
answer whose text is not found at its `answer_start` in the context, an answerable question
with no answer.

Unanswerable questions from v1.1 (`add_unanswerable`): SQuAD v2.0 is not on the registries, so
kbert builds v2.0-style data from v1.1 by pairing questions with a paragraph of a *different
article* (which, almost surely, does not answer them) and marking them impossible.

Windows over long contexts and the decoding of logits back to answer text are graph ops
(`kbert.text.span_preprocessor`, `kbert.text.span_decoding`), shared by training, evaluation,
`kbert predict` and the export.
"""

import dataclasses
import json
import os
import random
import re

from kbert.data.tasks import DataError, hold_out
from kbert.text.utf8 import read_utf8


@dataclasses.dataclass
class SquadExample:
    id: str
    question: str
    context: str
    answers: list = dataclasses.field(default_factory=list)  # [(text, char start)]
    is_impossible: bool = False
    title: str = ""

    @property
    def answer_texts(self):
        return [text for text, _ in self.answers]


def read_squad(path):
    """Examples of a SQuAD v1.1 or v2.0 JSON file, in file order. Returns (examples, version):
    the file's "version" field ("1.1" when absent and no question is marked impossible)."""
    path = os.fspath(path)
    raw = read_utf8(path)
    if not raw.strip():
        raise DataError(f"{path}: empty file.")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise DataError(f"{path}:{error.lineno}:{error.colno}: not valid JSON ({error.msg})."
                        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: not a SQuAD file (no top-level 'data' list).")
    examples, any_impossible = [], False
    for article in data["data"]:
        title = article.get("title", "")
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                qid = str(qa.get("id"))
                where = _Where(path, raw, qid)
                if not isinstance(context, str) or not context.strip():
                    raise DataError(f"{where}: empty context.")
                question = qa.get("question")
                if not isinstance(question, str) or not question.strip():
                    raise DataError(f"{where}: empty question.")
                impossible = bool(qa.get("is_impossible", False))
                any_impossible |= impossible
                answers = []
                for answer in ([] if impossible else qa.get("answers", [])):
                    text, start = answer.get("text"), answer.get("answer_start")
                    if not isinstance(text, str) or not text.strip() or \
                            not isinstance(start, int):
                        raise DataError(f"{where}: answer {answer!r} needs a non-empty 'text' "
                                        "and an integer 'answer_start'.")
                    found = context[start:start + len(text)]
                    if start < 0 or found != text:
                        raise DataError(f"{where}: answer {text!r} does not match the context "
                                        f"at answer_start={start} (found {found!r}).")
                    answers.append((text, start))
                if not impossible and not answers:
                    raise DataError(f"{where}: no answer, and not marked is_impossible.")
                examples.append(SquadExample(qid, question, context, answers, impossible,
                                             title))
    if not examples:
        raise DataError(f"{path}: no questions.")
    version = str(data.get("version", "2.0" if any_impossible else "1.1"))
    return examples, version


class _Where:
    """"path:line:column: question 'id'" of question `qid`, its "id" found in the file's
    `text` only when a message needs it (just the path where the id is not spelled plainly)."""

    def __init__(self, path, text, qid):
        self.path, self.text, self.qid = path, text, qid

    def __str__(self):
        found = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(self.qid)), self.text)
        where = self.path
        if found is not None:
            start = found.start()
            where += (f":{self.text.count(chr(10), 0, start) + 1}"
                      f":{start - self.text.rfind(chr(10), 0, start)}")
        return f"{where}: question {self.qid!r}"


def squad_files(train, dev=None, test=None, seed=0):
    """({"train", "dev"[, "test"]} → examples, version) of one's own SQuAD-format files
    (`read_squad`); without `dev`, the questions of a seeded tenth of the training file's
    paragraphs are held out (`hold_out`). The version is "2.0" when any file is (or marks a
    question impossible), else "1.1".

    Args:
        train: the training file.
        dev: the validation file, or None.
        test: the test file, or None.
        seed: the seed of the held-out tenth.

    Returns:
        (splits, version).
    """
    splits, versions = {}, set()
    for split, path in (("train", train), ("dev", dev), ("test", test)):
        if path is not None:
            splits[split], version = read_squad(path)
            versions.add(version)
    if dev is None:
        splits["train"], splits["dev"] = hold_out(splits["train"], seed,
                                                  key=lambda e: (e.title, e.context))
    return splits, "2.0" if "2.0" in versions else "1.1"


def add_unanswerable(examples, fraction=0.5, seed=0):
    """`examples` plus round(fraction × len) unanswerable questions: a question of one article
    paired with a paragraph of another, id "<id>_unanswerable", no answers. With the default,
    a third of the result is unanswerable, as in SQuAD v2.0."""
    titles = sorted({e.title for e in examples})
    if len(titles) < 2:
        raise ValueError("Making unanswerable questions needs examples from at least two "
                         "articles (titles).")
    rng = random.Random(seed)
    by_title = {}
    for e in examples:
        contexts = by_title.setdefault(e.title, [])
        if not contexts or contexts[-1] != e.context:
            contexts.append(e.context)
    chosen = rng.sample(range(len(examples)), round(fraction * len(examples)))
    extra = []
    for index in sorted(chosen):
        e = examples[index]
        other = rng.choice([t for t in titles if t != e.title])
        extra.append(SquadExample(f"{e.id}_unanswerable", e.question,
                                  rng.choice(by_title[other]), [], True, other))
    return list(examples) + extra


def references(examples):
    """{id: gold answer texts} for `kbert.evaluation.squad.squad_metrics` ([] = no answer)."""
    return {e.id: e.answer_texts for e in examples}
