import random

import pytest
import seqeval.metrics

from kbert.data.conll import (
    CONLL2003_LABELS,
    conll_files,
    detect_scheme,
    iob1_to_iob2,
    read_conll,
)
from kbert.data.tasks import DataError
from kbert.evaluation.entities import entity_metrics, entity_spans


def _seqeval(gold, pred):
    return (seqeval.metrics.precision_score(gold, pred, zero_division=0),
            seqeval.metrics.recall_score(gold, pred, zero_division=0),
            seqeval.metrics.f1_score(gold, pred, zero_division=0))


@pytest.mark.filterwarnings("ignore:.*seems not to be NE tag")
@pytest.mark.parametrize("tagset", [
    list(CONLL2003_LABELS),
    ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"],
    ["O", "I-ORG", "I-PER", "B-ORG", "X", "I", "B-"],  # IOB1-ish and malformed tags
])
def test_entity_scores_equal_seqeval_default_mode(tagset):
    rng = random.Random(len(tagset))
    for _ in range(200):
        gold = [[rng.choice(tagset) for _ in range(rng.randint(1, 15))]
                for _ in range(rng.randint(1, 6))]
        pred = [[rng.choice(tagset) if rng.random() < 0.4 else t for t in s] for s in gold]
        m = entity_metrics(gold, pred)
        assert (m["precision"], m["recall"], m["f1"]) == pytest.approx(_seqeval(gold, pred),
                                                                        abs=1e-12)


def test_hand_made_entities_and_counts():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "O"]]
    m = entity_metrics(gold, pred)
    assert (m["correct"], m["predicted"], m["gold"]) == (1, 3, 3)
    assert m["f1"] == pytest.approx(1 / 3)
    assert m["per_type"]["PER"]["f1"] == 1.0 and m["per_type"]["LOC"]["support"] == 1
    assert entity_spans(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == [
        ("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)]
    with pytest.raises(ValueError, match="Sentence 0"):
        entity_metrics([["O", "O"]], [["O"]])


def test_iob1_is_detected_and_converted(tmp_path):
    iob1 = tmp_path / "iob1.txt"
    iob1.write_text("-DOCSTART- -X- -X- O\n\n"
                    "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n\n"
                    "Peter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\nMary NNP I-NP B-PER\n\n"
                    "-DOCSTART- -X- -X- O\n\nParis NNP I-NP I-LOC\n")
    sentences, scheme = read_conll(iob1)
    assert scheme == "iob1" and len(sentences) == 3
    assert sentences[0].tags == ["B-ORG", "O", "B-MISC"]
    assert sentences[1].tags == ["B-PER", "I-PER", "B-PER"]
    assert sentences[2].words == ["Paris"] and sentences[2].source.endswith(":13")
    # same entities as seqeval reads the IOB1 tags
    raw = [["I-ORG", "O", "I-MISC"], ["I-PER", "I-PER", "B-PER"], ["I-LOC"]]
    assert entity_metrics(raw, [s.tags for s in sentences])["f1"] == 1.0
    with pytest.raises(DataError, match="iob1.txt:3"):
        read_conll(iob1, scheme="iob2")
    assert iob1_to_iob2(["O", "I-A", "I-B", "B-B"]) == ["O", "B-A", "B-B", "B-B"]


def test_bad_lines_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("EU NNP B-NP B-ORG\nrejects\n")
    with pytest.raises(DataError, match="bad.txt:2"):
        read_conll(bad)
    bad.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP ORG\n")  # an IOB file's stray tag
    with pytest.raises(DataError, match="bad.txt:2: tag 'ORG' is not O, B-TYPE or I-TYPE, as "
                                        "the file's other tags are \\(line 1: 'B-ORG'\\)"):
        read_conll(bad)


def test_tags_without_prefixes_tag_each_word(tmp_path):
    """A tag set of any names (parts of speech): each tagged word is a chunk of its own, so
    entity scores count words, and a dev file is read the way its training file was."""
    train, dev = tmp_path / "pos.conll", tmp_path / "pos-dev.conll"
    train.write_text("The DT\ncat NN\nsat VBD\n\nA DT\ndog NN\n.  O\n")
    dev.write_text("The DT\ndog NN\n")
    sentences, scheme = read_conll(train)
    assert scheme == "plain"
    assert [s.tags for s in sentences] == [["B-DT", "B-NN", "B-VBD"], ["B-DT", "B-NN", "O"]]
    assert entity_spans(sentences[0].tags) == [("DT", 0, 0), ("NN", 1, 1), ("VBD", 2, 2)]
    splits = conll_files(train, dev)
    assert splits["dev"][0].tags == ["B-DT", "B-NN"]
    dev.write_text("The DT\ndog JJ\n")
    with pytest.raises(DataError, match="pos-dev.conll:2: tag 'B-JJ' is not in the training"):
        conll_files(train, dev)


def test_real_conll2003_files():
    from kbert.data.conll import conll2003

    splits = conll2003()
    assert {k: len(v) for k, v in splits.items()} == {"train": 14041, "dev": 3250, "test": 3453}
    assert detect_scheme(splits["train"]) == "iob2"
    assert splits["train"][0].words[:2] == ["EU", "rejects"]
    tags = {t for s in splits["test"] for t in s.tags}
    assert tags == set(CONLL2003_LABELS)
