import numpy as np
import pytest

from kbert.data.squad import SquadExample, add_unanswerable, read_squad, references
from tests.spans.reference_squad import decode_answers, squad_features
from kbert.data.tasks import DataError
from kbert.evaluation.squad import squad_metrics
from tests.spans.helpers import squad_json, tokenizer

CONTEXT = ("Peter Smith was born in Paris in 1990. The river Seine flows through Paris, the "
           "capital city of France. John visited the Eiffel Tower, built in Paris. The cat sat "
           "on the mat in London. Peter went to Berlin in Germany and visited the art museum.")


def oracle_logits(features, size=10.0):
    """Logits peaked at each feature's training target (the answer, or [CLS])."""
    count, length = features["token_ids"].shape
    start = np.zeros((count, length), "float32")
    end = np.zeros((count, length), "float32")
    start[np.arange(count), features["start_positions"]] = size
    end[np.arange(count), features["end_positions"]] = size
    return start, end


def test_reader_reads_examples_and_version(tmp_path):
    path = squad_json(tmp_path / "s.json", [("Paris", [(CONTEXT, [
        ("q1", "Where was Peter Smith born?", [("Paris", None)]),
        ("q2", "What flows through Paris?", [("river Seine", None), ("Seine", None)])])])])
    examples, version = read_squad(path)
    assert version == "1.1" and [e.id for e in examples] == ["q1", "q2"]
    assert examples[1].answers == [("river Seine", CONTEXT.find("river Seine")),
                                   ("Seine", CONTEXT.find("Seine"))]
    assert references(examples)["q2"] == ["river Seine", "Seine"]


@pytest.mark.parametrize("context, answers, message", [
    ("   ", [("x", 0)], "question 'q1': empty context"),
    (CONTEXT, [("Paris", 3)], "question 'q1': answer 'Paris' does not match the context at "
                              "answer_start=3"),
    (CONTEXT, [], "question 'q1': no answer"),
])
def test_bad_files_name_the_file_and_question(tmp_path, context, answers, message):
    path = squad_json(tmp_path / "bad.json", [("T", [(context, [("q1", "Who?", answers)])])])
    with pytest.raises(DataError) as error:
        read_squad(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_windows_cover_the_context_with_the_stride():
    tok = tokenizer()
    example = SquadExample("q", "who went to berlin?", CONTEXT,
                           [("Berlin in Germany", CONTEXT.find("Berlin in Germany"))])
    f = squad_features([example], tok, sequence_length=24, doc_stride=6, max_query_length=8)
    n_context = len(tok.tokenize_with_offsets(CONTEXT, "char")[0])
    count = len(f["token_ids"])
    assert count > 3 and (f["example_index"] == 0).all()
    q_len = 5  # who went to berlin ?
    for i in range(count):
        ids = f["token_ids"][i]
        assert ids[0] == tok.cls_token_id and ids[q_len + 1] == tok.sep_token_id
        real = f["padding_mask"][i].sum()
        assert ids[real - 1] == tok.sep_token_id
        ctx = f["token_start"][i] >= 0
        assert (f["segment_ids"][i][ctx] == 1).all() and ctx.sum() == real - q_len - 3
        # the offsets point at real words of the context
        for s, e in zip(f["token_start"][i][ctx], f["token_end"][i][ctx]):
            assert CONTEXT[s:e].strip() == CONTEXT[s:e] and e > s
    # every context token has exactly one max-context window
    covered = {}
    for i in range(count):
        for s, m in zip(f["token_start"][i], f["max_context"][i]):
            if s >= 0:
                covered[s] = covered.get(s, 0) + int(m)
    assert len(covered) == n_context and set(covered.values()) == {1}
    # the target is the answer in windows that hold it whole, [CLS] elsewhere
    for i in range(count):
        s, e = f["start_positions"][i], f["end_positions"][i]
        if f["answer_in_window"][i]:
            text = CONTEXT[f["token_start"][i][s]:f["token_end"][i][e]]
            assert text == "Berlin in Germany"
        else:
            assert s == e == 0
    assert f["answer_in_window"].sum() >= 1


def test_long_questions_are_truncated_and_impossible_lengths_rejected():
    tok = tokenizer()
    question = " ".join(["who"] * 200) + " went to berlin?"
    example = SquadExample("q", question, CONTEXT, [("Berlin", CONTEXT.find("Berlin"))])
    f = squad_features([example], tok, sequence_length=32, doc_stride=8, max_query_length=10)
    assert (f["token_ids"][:, 1:11] == tok.token_to_id("who")).all()
    assert (f["token_ids"][:, 11] == tok.sep_token_id).all()
    assert (f["padding_mask"].sum(-1) <= 32).all()
    with pytest.raises(ValueError, match="leaves no room for the context"):
        squad_features([example], tok, sequence_length=12, max_query_length=10)


def test_oracle_logits_decode_to_the_gold_answers_across_windows():
    tok = tokenizer()
    questions = [("Where was Peter Smith born?", "Paris"),
                 ("What is the capital city of?", "France"),
                 ("Who visited the tower?", "John"),
                 ("Where did the cat sit?", "on the mat in London"),
                 ("Where is the museum?", "Berlin in Germany")]
    examples = [SquadExample(f"q{i}", q, CONTEXT, [(a, CONTEXT.find(a))])
                for i, (q, a) in enumerate(questions)]
    f = squad_features(examples, tok, sequence_length=32, doc_stride=8, max_query_length=12)
    assert len(f["token_ids"]) > 2 * len(examples)
    start, end = oracle_logits(f)
    predictions, details = decode_answers(examples, f, start, end)
    assert predictions == {e.id: e.answers[0][0] for e in examples}
    for e in examples:
        d = details[e.id]
        assert CONTEXT[d["start"]:d["end"]] == d["text"] and d["start"] == e.answers[0][1]
    assert squad_metrics(predictions, references(examples))["exact_match"] == 100.0


def test_decoding_keeps_spans_valid():
    tok = tokenizer()
    example = SquadExample("q", "who was born in paris?", CONTEXT)
    f = squad_features([example], tok, sequence_length=128, max_query_length=16)
    assert len(f["token_ids"]) == 1
    ctx = np.nonzero(f["token_start"][0] >= 0)[0]
    start = np.zeros((1, 128), "float32")
    end = np.zeros((1, 128), "float32")
    start[0, 2] = end[0, 3] = 100.0  # question tokens: never an answer
    start[0, ctx[52]], end[0, ctx[51]] = 50.0, 50.0  # end before start: invalid
    start[0, ctx[0]], end[0, ctx[1]] = 10.0, 10.0  # "Peter Smith"
    start[0, ctx[10]], end[0, ctx[50]] = 30.0, 30.0  # longer than max_answer_length
    predictions, details = decode_answers([example], f, start, end, max_answer_length=30)
    assert predictions["q"] == "Peter Smith" and details["q"]["score"] == pytest.approx(20.0)
    predictions, details = decode_answers([example], f, start, end, max_answer_length=100)
    assert predictions["q"] == CONTEXT[f["token_start"][0][ctx[10]]:f["token_end"][0][ctx[51]]]
    assert details["q"]["score"] == pytest.approx(80.0)


def test_v2_null_answer_and_threshold():
    tok = tokenizer()
    examples = [SquadExample("a", "who was born in paris?", CONTEXT),
                SquadExample("n", "who was born in rome?", CONTEXT)]
    f = squad_features(examples, tok, sequence_length=128, max_query_length=16)
    start = np.zeros((2, 128), "float32")
    end = np.zeros((2, 128), "float32")
    ctx = np.nonzero(f["token_start"][0] >= 0)[0]
    start[:, ctx[0]] = end[:, ctx[1]] = 5.0  # "Peter Smith": 10
    start[0, 0] = end[0, 0] = 2.0            # null 4: diff -6 → answer
    start[1, 0] = end[1, 0] = 7.0            # null 14: diff 4 → no answer
    predictions, details = decode_answers(examples, f, start, end, version="2.0")
    assert predictions == {"a": "Peter Smith", "n": ""}
    assert details["n"]["null_score_diff"] == pytest.approx(4.0)
    assert details["n"]["best_text"] == "Peter Smith" and details["n"]["start"] == -1
    predictions, _ = decode_answers(examples, f, start, end, version="2.0", null_threshold=5.0)
    assert predictions == {"a": "Peter Smith", "n": "Peter Smith"}
    # v1.1 never abstains
    assert decode_answers(examples, f, start, end, version="1.1")[0]["n"] == "Peter Smith"


def test_unanswerable_questions_made_from_v1(tmp_path):
    other = "The cat sat on the mat in London."
    path = squad_json(tmp_path / "s.json", [
        ("Paris", [(CONTEXT, [(f"p{i}", "Where was Peter Smith born?", [("Paris", None)])
                              for i in range(6)])]),
        ("Cats", [(other, [(f"c{i}", "Where did the cat sit?", [("on the mat", None)])
                           for i in range(6)])])])
    examples, _ = read_squad(path)
    mixed = add_unanswerable(examples, fraction=0.5, seed=1)
    extra = mixed[len(examples):]
    assert len(extra) == 6 and all(e.is_impossible and not e.answers for e in extra)
    by_id = {e.id: e for e in examples}
    for e in extra:
        source = by_id[e.id[:-len("_unanswerable")]]
        assert e.question == source.question and e.title != source.title
        assert e.context != source.context
    assert references(mixed)[extra[0].id] == []
    # oracle targets: unanswerable features point at [CLS]; decoding abstains on them
    f = squad_features(mixed, tokenizer(), sequence_length=64, max_query_length=16)
    impossible = np.array([mixed[i].is_impossible for i in f["example_index"]])
    assert (f["start_positions"][impossible] == 0).all()
    start, end = oracle_logits(f)
    predictions, _ = decode_answers(mixed, f, start, end, version="2.0")
    scores = squad_metrics(predictions, references(mixed), "2.0")
    assert scores["exact_match"] == 100.0 and scores["no_answer_total"] == 6
    with pytest.raises(ValueError, match="two"):
        add_unanswerable(examples[:6])


@pytest.mark.slow
def test_real_dev_slice_oracle_round_trip(minilm_dir):
    from kbert.data.sources import fetch
    from kbert.text import BertTokenizer

    examples, version = read_squad(fetch("squad") / "dev-v1.1.json")
    assert version == "1.1" and len(examples) == 10570
    examples = examples[:300]
    f = squad_features(examples, BertTokenizer.from_pretrained(minilm_dir),
                       sequence_length=128, doc_stride=64, max_query_length=32)
    assert len(f["token_ids"]) > len(examples) and not f["unmappable"]
    start, end = oracle_logits(f)
    predictions, _ = decode_answers(examples, f, start, end)
    scores = squad_metrics(predictions, references(examples))
    # the sub-token spans recover the gold answers; the misses are SQuAD's own first answers
    # that start inside a word ("8" at the 8 of "20–18", "gold" inside "golden"), which no
    # sub-token span reproduces (10 of these 300 questions)
    assert scores["exact_match"] > 96 and scores["f1"] > 96
