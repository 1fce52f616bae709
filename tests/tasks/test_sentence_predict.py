"""`SentenceTask.predict` (what `kbert predict` runs) refuses input its model does not read,
instead of answering about other input: one sentence for a pair model, a pair for a
single-sentence model, another number of choices than a multiple-choice model scores."""

import numpy as np
import pytest

from kbert.config import BertConfig
from kbert.data.tasks import TaskData
from kbert.models import BertBackbone, BertClassifier, BertMultipleChoice
from kbert.tasks.sentence import SentenceTask
from tests.tasks.helpers import VOCAB, preprocessor


@pytest.fixture(scope="module")
def backbone():
    return BertBackbone(BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_layers=1,
                                   num_heads=2, intermediate_size=32,
                                   max_position_embeddings=32))


def _spec(kind, num_classes, text):
    return SentenceTask(TaskData("t", kind, num_classes, {"train": [(text, 0)], "dev": []}))


@pytest.mark.slow
def test_pairs_and_single_sentences_are_not_mixed(backbone):
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor())
    pair, single = _spec("classification", 2, ("a", "b")), _spec("classification", 2, "a")
    with pytest.raises(ValueError, match="reads sentence pairs: give text_pair too"):
        pair.predict(model, text="good film")
    with pytest.raises(ValueError, match="reads single sentences: text_pair does not apply"):
        single.predict(model, text=["good film"], text_pair=["dull"])
    answers = pair.predict(model, text=["good film", "a"], text_pair=["dull", "b"])
    direct = model.predict((["good film", "a"], ["dull", "b"]), verbose=0)
    np.testing.assert_array_equal([a["label_id"] for a in answers], direct.argmax(-1))
    assert single.predict(model, text="good film")["label"] in ("0", "1")


def test_choices_must_number_what_the_model_scores(backbone):
    model = BertMultipleChoice(backbone, num_choices=3, preprocessor=preprocessor())
    spec = _spec("multiple_choice", 3, ("why ?", ("a", "b", "c")))
    with pytest.raises(ValueError, match=r"takes 3 choices a text; row 1 has 2 \('who \?'\)"):
        spec.predict(model, text=["why ?", "who ?"], choices=[["a", "b", "c"], ["yes", "no"]])
    answer = spec.predict(model, text="why ?", choices=["a", "b", "c"])
    assert len(answer["probabilities"]) == 3


@pytest.mark.slow
def test_the_spec_a_run_records_answers_like_the_one_that_trained_it(backbone):
    """`kbert predict` builds the spec from run.json (`SentenceTask.from_run`), not the data."""
    model = BertMultipleChoice(backbone, num_choices=3, preprocessor=preprocessor())
    example = (("why ?", ("a", "b", "c")), 1)
    trained = SentenceTask(TaskData("t", "multiple_choice", 3, {"train": [example]},
                                    ("x", "y", "z")))
    recorded = SentenceTask.from_run({"task": "t", "kind": "multiple_choice", **trained.info()})
    assert recorded.splits() == {} and not recorded.task.is_pair
    question = dict(text=["why ?", "who ?"], choices=[["a", "b", "c"], ["c", "b", "a"]])
    assert recorded.predict(model, **question) == trained.predict(model, **question)
    pair = SentenceTask(TaskData("p", "classification", 2, {"train": [(("a", "b"), 0)]}))
    assert SentenceTask.from_run({"task": "p", "kind": "classification",
                                  **pair.info()}).task.is_pair


def test_inputs_a_model_does_not_read_are_refused_by_name(backbone):
    """`kbert predict --choice x` on a sentiment model answered about the text alone, as if
    the choices had not been given; so did a SQuAD model given text, a tagger given a pair."""
    from kbert.tasks.conll import ConllTask
    from kbert.tasks.squad import SquadTask

    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor())
    single = _spec("classification", 2, "a")
    with pytest.raises(ValueError, match="A t model does not read choices"):
        single.predict(model, text="good film", choices=["a", "b"])
    choice = _spec("multiple_choice", 3, ("why ?", ("a", "b", "c")))
    with pytest.raises(ValueError, match="does not read text_pair"):
        choice.predict(model, text="why ?", text_pair="b", choices=["a", "b", "c"])
    with pytest.raises(ValueError, match="A squad model does not read choices, text"):
        SquadTask().predict(None, question="q", context="c", text="t", choices=["x"])
    with pytest.raises(ValueError, match="A conll model does not read text_pair"):
        ConllTask().predict(None, text="a", text_pair="b", question=None)
