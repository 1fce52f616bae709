"""What one serving request may hold and cost (issue #23): ids, segments and masks out of range
refused by `serve_token_ids` with an error naming the input (they used to wrap: id -5 answered as
vocab_size - 5), and each text cut before tokenization to what the kept tokens can come from
(16 MB used to be tokenized whole), with the ids of real text unchanged by the cut."""

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.data.sources import fetch
from kbert.export.signatures import ServingModule
from kbert.models import BertBackbone, BertClassifier, BertMultipleChoice
from kbert.text import BertPreprocessor, BertTokenizer
from kbert.text.preprocessor_base import cap_text, text_budget
from kbert.text.span_preprocessor import BertSpanPreprocessor
from kbert.text.token_preprocessor import BertTokenPreprocessor
from tests.spans import reference_conll
from tests.spans.helpers import tiny_config, tokenizer

KEYS = ("token_ids", "segment_ids", "padding_mask")


@pytest.fixture(scope="module")
def real_text():
    """Long real texts: SQuAD dev contexts run together, each ~300 KB (more than any cap)."""
    squad = json.loads((fetch("squad") / "dev-v1.1.json").read_text(encoding="utf-8"))
    contexts = [p["context"] for a in squad["data"] for p in a["paragraphs"]]
    random.Random(0).shuffle(contexts)
    return [" ".join(contexts[i:i + 400]) for i in range(0, 1600, 400)]


@pytest.fixture(scope="module")
def real_tokenizer():
    return BertTokenizer.from_pretrained("minilm_l6_h384_uncased")


# --- serve_token_ids checks its inputs ------------------------------------------------------

@pytest.fixture(scope="module")
def classifier_export():
    """The signatures of a tiny classifier's export, in this process (tests/test_fuzz.py runs
    the same requests on saved exports in a fresh serving process)."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(tiny_config()), num_classes=2)
    module = ServingModule(model, BertPreprocessor(tokenizer(), sequence_length=16))
    return model, module.signatures()


BAD_INPUTS = [  # (change to a valid request, words the error must hold)
    ({"token_ids": [[2, -5, 6, 3]]}, "token_ids must be vocabulary ids, in [0, 57)"),
    ({"token_ids": [[2, 57, 6, 3]]}, "token_ids must be vocabulary ids, in [0, 57)"),
    ({"segment_ids": [[0, -1, 0, 0]]}, "segment_ids must be in [0, 2)"),
    ({"segment_ids": [[0, 2, 0, 0]]}, "segment_ids must be in [0, 2)"),
    ({"padding_mask": [[1, 5, 1, 1]]}, "padding_mask must be 0 or 1"),
    ({"padding_mask": [[1, -1, 1, 1]]}, "padding_mask must be 0 or 1"),
    ({"segment_ids": [[0, 0, 0]]}, "segment_ids must have the shape of token_ids"),
    ({k: [[5] * 129] for k in ("token_ids", "segment_ids")} | {"padding_mask": [[1] * 129]},
     "at most 128 tokens"),
    ({k: [[]] for k in KEYS}, "at least one token"),  # was a strided-slice error
]


@pytest.mark.slow
def test_serve_token_ids_refuses_inputs_out_of_range(classifier_export):
    model, signatures = classifier_export
    serve = signatures["serve_token_ids"]
    good = {"token_ids": [[2, 5, 6, 3]], "segment_ids": [[0] * 4], "padding_mask": [[1] * 4]}
    as_tensors = lambda d: {k: tf.constant(v, tf.int32) for k, v in d.items()}
    for change, words in BAD_INPUTS:
        with pytest.raises(tf.errors.InvalidArgumentError, match=words.replace("[", r"\[")
                           .replace("(", r"\(").replace(")", r"\)")):
            serve(**as_tensors({**good, **change}))
    np.testing.assert_allclose(serve(**as_tensors(good))["logits"],
                               model(as_tensors(good), training=False), atol=1e-5)
    empty = serve(**{k: tf.zeros([0, 4], tf.int32) for k in KEYS})
    assert empty["logits"].shape == (0, 2)


def test_multiple_choice_ids_are_checked_too(tmp_path):
    model = BertMultipleChoice(BertBackbone(tiny_config()), num_choices=2)
    module = ServingModule(model)
    ids = tf.constant([[[2, 5, 3], [2, 6, 3]]])
    ok = module.functions["serve_token_ids"](ids, tf.zeros_like(ids), tf.ones_like(ids))
    assert ok["probabilities"].shape == (1, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="token_ids must be vocabulary"):
        module.functions["serve_token_ids"](-ids, tf.zeros_like(ids), tf.ones_like(ids))


def test_export_refuses_a_preprocessor_the_model_cannot_take():
    model = BertClassifier(BertBackbone(tiny_config()), num_classes=2)
    with pytest.raises(ValueError, match="sequence_length=256 exceeds the model's 128"):
        ServingModule(model, BertPreprocessor(tokenizer(), sequence_length=256))
    big = BertTokenizer(tokenizer().get_vocabulary() + [f"w{i}" for i in range(10)])
    with pytest.raises(ValueError, match="67 tokens but the model's embedding only 57"):
        ServingModule(model, BertPreprocessor(big, sequence_length=16))


# --- the cut before tokenization ------------------------------------------------------------

def test_cap_text_keeps_whole_characters():
    rng = random.Random(0)
    planes = [(32, 127), (128, 0x7FF), (0x800, 0xD7FF), (0x10000, 0x10FFFF)]
    texts = ["".join(chr(rng.randint(*rng.choice(planes))) for _ in range(rng.randint(0, 40)))
             .encode() for _ in range(400)]
    limits = [rng.randint(4, 80) for _ in texts]
    for text, limit in zip(texts, limits):
        cut = cap_text(tf.constant([text]), limit).numpy()[0]
        cut.decode("utf-8")  # never a broken character
        assert text.startswith(cut)
        assert cut == text if len(text) <= limit else limit - 3 <= len(cut) <= limit
    # Invalid UTF-8 is cut anyway (at the budget when no character starts near it).
    assert cap_text(tf.constant([b"\x80" * 20, b"ab\xff\xfecd"]), 5).numpy().tolist() == [
        b"\x80" * 5, b"ab\xff\xfec"]
    assert cap_text(tf.constant([["abcdef", "é" * 4]]), 5).numpy().tolist() == [
        [b"abcde", "éé".encode()]]


def _google_pair_truncation(a, b, budget):
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()
    return a, b


def test_cut_text_gives_the_uncut_ids_on_real_text(real_text, real_tokenizer):
    # Hugging Face's 100 characters a word: the tighter of the two budgets.
    tok = BertTokenizer(real_tokenizer.get_vocabulary(), max_chars_per_word=100)
    assert text_budget(tok, 10) == 11 * 101 * 4
    assert text_budget(BertTokenizer(tokenizer().get_vocabulary()), 10) == 11 * 201 * 4
    seq = 128
    assert min(len(t.encode()) for t in real_text) > 2 * text_budget(tok, seq)
    full = tok(tf.constant(real_text)).to_list()  # the reference: no cut
    cls, sep = tok.cls_token_id, tok.sep_token_id
    pre = BertPreprocessor(tok, seq, return_offsets=True)
    single = pre(tf.constant(real_text))
    for n, ids in enumerate(full):
        assert single["token_ids"][n].numpy().tolist() == [cls] + ids[:seq - 2] + [sep]
    _, starts, _ = tok.tokenize_with_offsets(tf.constant(real_text[:1]))
    assert single["start_offsets"][0, 1:-1].numpy().tolist() == starts[0, :seq - 2].numpy(
        ).tolist()
    # Pairs: a long text with a short one either way round, and two long ones.
    short = "Which river flows through the city?"
    firsts, seconds = real_text[:2] + [short], [short] + real_text[2:4]
    pairs = pre((tf.constant(firsts), tf.constant(seconds)))["token_ids"].numpy()
    lengths = {short: tok(tf.constant([short])).to_list()[0]}
    lengths.update(zip(real_text, full))
    for n, (x, y) in enumerate(zip(firsts, seconds)):
        a, b = _google_pair_truncation(lengths[x], lengths[y], seq - 3)
        assert pairs[n].tolist() == [cls] + a + [sep] + b + [sep]


def test_what_the_cut_loses_is_what_the_docstring_says(real_tokenizer):
    """The documented approximation: tokens after more than the budget of characters that give
    no token are lost; with one token before them, the rest is unchanged."""
    pre = BertPreprocessor(real_tokenizer, 16)
    budget = text_budget(real_tokenizer, 14)
    lost = pre(tf.constant([" " * budget + "the river flows"]))["token_ids"][0]
    assert lost.numpy().tolist()[:3] == [real_tokenizer.cls_token_id,
                                         real_tokenizer.sep_token_id, 0]


def test_span_questions_and_contexts_are_bounded(real_text, real_tokenizer):
    tok = real_tokenizer
    pre = BertSpanPreprocessor(tok, 64, doc_stride=16, max_query_length=8,
                               max_context_length=100)
    question, context = real_text[0][:200_000], real_text[1]
    windows = pre.windows(tf.constant([question]), tf.constant([context]))
    ids = windows["token_ids"].numpy()
    q = tok(tf.constant([question])).to_list()[0][:8]
    assert (ids[:, 1:9] == q).all()
    # The first 100 context sub-tokens, windowed: room 53, step 16 → 1 + ceil(47 / 16) windows.
    assert len(ids) == 4
    c = tok(tf.constant([context])).to_list()[0]
    last = ids[-1][windows["padding_mask"].numpy()[-1] == 1][10:-1]
    assert last.tolist() == c[48:100]
    assert BertSpanPreprocessor.from_config(pre.get_config()).max_context_length == 100


def test_token_tagging_text_cut_keeps_the_reference_features(real_text, real_tokenizer):
    pre = BertTokenPreprocessor(real_tokenizer, 64)
    words, starts, _, _ = pre.split_text(tf.constant(real_text[:2]))
    got = pre(words)
    for n, text in enumerate(real_text[:2]):
        expected = reference_conll.conll_features(
            [reference_conll.split_words(text)[0]], real_tokenizer, 64)
        for key in ("token_ids", "word_index"):
            assert got[key][n].numpy().tolist() == expected[key][0].tolist(), key
    assert starts.row_lengths().numpy().max() < 100_000  # the split saw only the cut text


@pytest.mark.slow
def test_a_huge_request_answers_as_its_beginning(classifier_export):
    """16 MB in the served model: the answer of the text's first budget of bytes (bounded
    work; the time and memory are measured by benchmarks/fuzz.py, not asserted here)."""
    _, signatures = classifier_export
    serve = signatures["serving_default"]
    text = ("the cat sat on the mat in paris . " * 500_000)[:16_000_000]
    huge = serve(text=tf.constant([text, "the cat"]))
    head = serve(text=tf.constant([text[:1000], "the cat"]))
    np.testing.assert_allclose(huge["logits"], head["logits"], atol=1e-6)
    # The cut is in the served graph: what lies beyond the budget is not read at all.
    hidden = " " * text_budget(tokenizer(), 14) + "the cat"
    out = serve(text=tf.constant([hidden, ""]))["logits"].numpy()
    np.testing.assert_allclose(out[0], out[1], atol=1e-6)
