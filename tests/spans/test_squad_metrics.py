import pytest

from kbert.evaluation.squad import (
    best_null_threshold,
    exact_match,
    normalize_answer,
    squad_metrics,
    token_f1,
)


def test_normalization_follows_the_official_rules():
    assert normalize_answer("  The  Eiffel-Tower, in PARIS! ") == "eiffeltower in paris"
    assert normalize_answer("an apple and a pear") == "apple and pear"
    assert normalize_answer("theater") == "theater"  # articles only as whole words
    assert normalize_answer("A") == ""


def test_hand_made_v1_scores():
    refs = {"q1": ["Denver Broncos", "The Denver Broncos"],
            "q2": ["Santa Clara, California"],
            "q3": ["Carolina Panthers"],
            "q4": ["gold"]}
    preds = {"q1": "the Denver Broncos.",          # EM 1, F1 1
             "q2": "Santa Clara",                  # EM 0, F1 2*(1*2/3)/(1+2/3) = 0.8
             "q3": "Panthers Carolina Panthers"}   # EM 0, P 2/3, R 1 → F1 0.8
    # q4 missing → 0, 0
    m = squad_metrics(preds, refs)
    assert m["total"] == 4
    assert m["exact_match"] == pytest.approx(100 * 1 / 4)
    assert m["f1"] == pytest.approx(100 * (1 + 0.8 + 0.8 + 0) / 4)
    assert token_f1("Santa Clara", "Santa Clara, California") == pytest.approx(0.8)
    assert exact_match("The Broncos", "broncos") == 1.0


def test_max_over_gold_answers():
    m = squad_metrics({"q": "in 1990"}, {"q": ["1990", "in 1990s", "in 1990"]})
    assert m["exact_match"] == 100.0 and m["f1"] == 100.0
    m = squad_metrics({"q": "1990 season"}, {"q": ["1990", "the season"]})
    # vs "1990": P 1/2, R 1 → 2/3; vs "season": 2/3 too
    assert m["exact_match"] == 0.0 and m["f1"] == pytest.approx(100 * 2 / 3)


def test_hand_made_v2_scores_with_no_answer_questions():
    refs = {"a1": ["Paris"], "a2": [{"text": "blue whale", "answer_start": 3}],
            "n1": [], "n2": [], "n3": [{"text": "the", "answer_start": 0}]}  # "the" → no answer
    preds = {"a1": "Paris", "a2": "", "n1": "", "n2": "something", "n3": ""}
    m = squad_metrics(preds, refs, version="2.0")
    # a1: 1/1, a2: 0/0 (empty prediction, answerable), n1: 1/1, n2: 0/0, n3: 1/1
    assert m["exact_match"] == pytest.approx(60.0) and m["f1"] == pytest.approx(60.0)
    assert m["has_answer_total"] == 2 and m["has_answer_exact_match"] == pytest.approx(50.0)
    assert m["no_answer_total"] == 3 and m["no_answer_f1"] == pytest.approx(100 * 2 / 3)
    assert token_f1("", "", version="2.0") == 1.0 and token_f1("", "", version="1.1") == 0.0


def test_unanswerable_reference_needs_v2():
    with pytest.raises(ValueError, match="2.0"):
        squad_metrics({"q": ""}, {"q": []}, version="1.1")
    with pytest.raises(ValueError, match="version"):
        squad_metrics({}, {"q": ["x"]}, version="3")


def test_best_null_threshold_picks_the_f1_optimal_cut():
    refs = {"a": ["cat"], "b": ["dog"], "n": [], "m": []}
    best = {"a": "cat", "b": "wolf", "n": "bird", "m": "fish"}
    diffs = {"a": -2.0, "b": 1.0, "n": 3.0, "m": 0.5}
    # threshold below 3 and >= 1: a, b, m answered; n abstains → a 1, b 0, n 1, m 0 = 50
    # threshold in [-2, 0.5): a answered, others abstain → a 1, b 0, n 1, m 1 = 75
    threshold, value = best_null_threshold(diffs, best, refs)
    assert value == pytest.approx(75.0)
    answered = {q for q in refs if diffs[q] <= threshold}
    assert answered == {"a"}
    preds = {q: (best[q] if diffs[q] <= threshold else "") for q in refs}
    assert squad_metrics(preds, refs, "2.0")["f1"] == pytest.approx(value)
