"""SQuAD v1.1 / v2.0 exact match and F1, as the official evaluation scripts define them.

Both answers are normalised first: lower-cased, punctuation removed, the articles "a", "an",
"the" removed, whitespace collapsed. Exact match is 1 when the normalised strings are equal; F1
is the harmonic mean of token precision and recall between them (tokens = the normalised string
split on whitespace, counted with multiplicity). A question scores the maximum over its gold
answers, and the totals are averages ×100.

v1.1 and v2.0 differ in one place: in v2.0 a question may have no answer. Its gold answer list
is then `[""]` (gold answers that normalise to nothing are dropped first), and an empty
prediction ("no answer") scores EM = F1 = 1 against it, any other prediction 0; likewise a
non-empty gold answer against an empty prediction scores 0. (The v1.1 script gives F1 = 0 when
no token is shared, which agrees everywhere except that both-empty case, which v1.1 data never
has.)

A question missing from the predictions scores 0 (the official scripts do the same and warn).
"""

import collections
import re
import string

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str, version="1.1") -> float:
    """Token-overlap F1 of two answers. With version "2.0", two empty answers score 1."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if version == "2.0" and (not pred_tokens or not gold_tokens):
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    shared = sum(common.values())
    if shared == 0:
        return 0.0
    precision = shared / len(pred_tokens)
    recall = shared / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def gold_answers(answers, version="1.1"):
    """The gold texts a prediction is scored against (`answers`: strings or SQuAD answer dicts).
    In v2.0, answers that normalise to "" are dropped and an unanswerable question gets [""]."""
    texts = [a["text"] if isinstance(a, dict) else a for a in answers]
    if version == "2.0":
        texts = [t for t in texts if normalize_answer(t)] or [""]
    return texts


def _check_version(version):
    version = str(version)
    if version not in ("1.1", "2.0"):
        raise ValueError(f"SQuAD version must be '1.1' or '2.0', got {version!r}.")
    return version


def question_scores(predictions: dict, references: dict, version="1.1"):
    """Per-question {id: (exact_match, f1)} for every id in `references` (id → gold answers:
    strings or answer dicts; [] for an unanswerable v2.0 question)."""
    version = _check_version(version)
    scores = {}
    for qid, answers in references.items():
        golds = gold_answers(answers, version)
        if qid not in predictions:
            scores[qid] = (0.0, 0.0)
            continue
        if not golds:
            raise ValueError(f"Question {qid!r} has no gold answer (use version='2.0' for "
                             "unanswerable questions).")
        prediction = predictions[qid]
        scores[qid] = (max(exact_match(prediction, g) for g in golds),
                       max(token_f1(prediction, g, version) for g in golds))
    return scores


def squad_metrics(predictions: dict, references: dict, version="1.1") -> dict:
    """The official SQuAD numbers, ×100: `exact_match`, `f1`, `total`; v2.0 adds
    `has_answer_exact_match` / `has_answer_f1` / `has_answer_total` and the same for
    `no_answer_` (when the references hold such questions).

    `predictions`: question id → predicted text ("" = no answer). `references`: question id →
    gold answers (strings or SQuAD answer dicts; [] = unanswerable). Ids in `predictions` that
    are not in `references` are ignored, as the official scripts do.
    """
    version = _check_version(version)
    scores = question_scores(predictions, references, version)
    if not scores:
        raise ValueError("No reference questions to score.")

    def summary(ids, prefix=""):
        em = [scores[i][0] for i in ids]
        f1 = [scores[i][1] for i in ids]
        return {f"{prefix}exact_match": 100.0 * float(np.mean(em)),
                f"{prefix}f1": 100.0 * float(np.mean(f1)),
                f"{prefix}total": len(ids)}

    result = summary(list(scores))
    if version == "2.0":
        answerable = [q for q in scores if gold_answers(references[q], version) != [""]]
        unanswerable = [q for q in scores if q not in set(answerable)]
        if answerable:
            result.update(summary(answerable, "has_answer_"))
        if unanswerable:
            result.update(summary(unanswerable, "no_answer_"))
    return result


def best_null_threshold(null_score_diffs: dict, best_answers: dict, references: dict,
                        metric="f1"):
    """The v2.0 no-answer threshold that maximises `metric` ("f1" or "exact_match") on
    `references`, and that best value (×100).

    `null_score_diffs`: question id → null score − best non-null score; `best_answers`:
    id → the best non-null answer text. A question is answered "" exactly when its diff >
    threshold. The candidates are the observed diffs (the largest one: answer everything) and
    one below the smallest (answer nothing); the first best in that order wins.
    """
    if metric not in ("f1", "exact_match"):
        raise ValueError(f"metric must be 'f1' or 'exact_match', got {metric!r}.")
    column = 1 if metric == "f1" else 0
    ids = [q for q in references if q in null_score_diffs]
    if not ids:
        raise ValueError("No question has a null score difference.")
    answered = question_scores({q: best_answers[q] for q in ids}, references, "2.0")
    abstained = question_scores({q: "" for q in ids}, references, "2.0")
    # Start with threshold = +inf (always answer), then lower it past each diff in turn: the
    # questions with diff > threshold switch to "no answer".
    order = sorted(ids, key=lambda q: -null_score_diffs[q])
    total = sum(answered[q][column] for q in ids)
    # Questions missing from null_score_diffs still count (as 0) in the denominator.
    count = len(references)
    best_value, best_threshold = total, max(null_score_diffs[q] for q in ids)
    for position, qid in enumerate(order):
        total += abstained[qid][column] - answered[qid][column]
        following = order[position + 1] if position + 1 < len(order) else None
        if following is not None and null_score_diffs[following] == null_score_diffs[qid]:
            continue  # ties switch together
        threshold = (null_score_diffs[following] if following is not None
                     else null_score_diffs[qid] - 1.0)
        if total > best_value:
            best_value, best_threshold = total, threshold
    return float(best_threshold), 100.0 * best_value / count
