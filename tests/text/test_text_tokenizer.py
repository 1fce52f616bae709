"""BertTokenizer behaviour beyond agreement: API, errors, edge inputs, offsets, saving."""

import json
import time

import keras
import pytest
import tensorflow as tf

from kbert.data.sources import fetch
from kbert.text.tokenizer import BertTokenizer
from kbert.text.tokenizer_files import casing_from_checkpoint
from reference_tokenizer import basic_tokenize

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def tok(uncased_vocab):
    return BertTokenizer(uncased_vocab)


def tokens(tok, text):
    return [tok.id_to_token(i) for i in tok(tf.constant([text]))[0].numpy()]


def test_output_is_ragged_int32_without_special_tokens(tok):
    ids = tok(tf.constant(["Hello, world!", ""]))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.to_list() == [[7592, 1010, 2088, 999], []]
    assert tok(tf.constant("hello")).numpy().tolist() == [7592]  # a scalar gives one row


def test_special_token_ids_and_lookups(tok):
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id,
            tok.mask_token_id) == (0, 100, 101, 102, 103)
    assert tok.vocabulary_size() == 30522
    assert tok.id_to_token(101) == "[CLS]" and tok.token_to_id("[SEP]") == 102
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.token_to_id("definitely-not-a-token")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.id_to_token(30522)


def test_typed_special_tokens_are_ordinary_text(tok):
    assert tokens(tok, "[SEP] [CLS]x[MASK]") == ["[", "sep", "]", "[", "cl", "##s", "]", "x",
                                                   "[", "mask", "]"]


def test_wordpiece_and_unknowns(tok):
    assert tokens(tok, "unaffable") == ["una", "##ffa", "##ble"]
    assert tok.max_chars_per_word == 200  # Google's limit (boundaries: test_text_word_limit)
    assert tokens(tok, "a" * 200)[0] != "[UNK]"
    assert tokens(tok, "a" * 201) == ["[UNK]"]
    assert tokens(tok, "é" * 201) == ["[UNK]"]  # 201 characters (402 bytes) before accents go
    assert tokens(tok, "\u2603\u2603") == ["[UNK]"]  # a word no piece covers is one [UNK]


def test_missing_special_tokens_are_named():
    with pytest.raises(ValueError, match=r"\[CLS\].*\[MASK\]"):
        BertTokenizer(["[PAD]", "[UNK]", "[SEP]", "a"])


def test_bad_vocabularies_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="repeats tokens"):
        BertTokenizer(SPECIALS + ["a", "a"])
    with pytest.raises(ValueError, match="empty tokens"):
        BertTokenizer(SPECIALS + ["", "a"])
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        BertTokenizer(tmp_path / "nope.txt")
    with pytest.raises(TypeError, match="string inputs"):
        BertTokenizer(SPECIALS)(tf.constant([1, 2]))


def test_invalid_utf8_is_dropped_not_an_error(tok):
    assert tok(tf.constant([b"caf\xc3 ok\xff"])).to_list() == tok(
        tf.constant(["caf ok"])).to_list()


def test_empty_whitespace_and_huge_strings(tok):
    texts = ["", " ", "\t\n \u3000\u2028", "\x00\u200b", "word " * 200_000,
             "x" * 1_000_000, "!" * 1_000_000]
    start = time.perf_counter()
    ids = tok(tf.constant(texts))
    elapsed = time.perf_counter() - start
    lengths = ids.row_lengths().numpy().tolist()
    assert lengths[:4] == [0, 0, 0, 0]
    assert lengths[4] == 200_000 and lengths[5] == 1 and lengths[6] == 1_000_000
    assert ids[5].numpy().tolist() == [tok.unk_token_id]
    assert elapsed < 30, f"3 MB of text took {elapsed:.1f}s"


def test_detokenize_glues_wordpieces(tok):
    ids = tok(tf.constant(["Unaffable people, hello!", "x"]))
    assert tok.detokenize(ids).numpy().tolist() == [b"unaffable people , hello !", b"x"]
    dense = ids.to_tensor(tok.pad_token_id)
    assert tok.detokenize(dense).numpy().tolist() == [b"unaffable people , hello !", b"x"]


@pytest.mark.slow
def test_lowercase_flag(cased_vocab):
    tokens_, _ = cased_vocab
    cased = BertTokenizer(tokens_, lowercase=False)
    assert cased.id_to_token(cased(tf.constant(["The"]))[0][0].numpy()) == "The"


def test_from_pretrained_reads_casing(tmp_path):
    model_dir = fetch("minilm")
    tok = BertTokenizer.from_pretrained(model_dir)
    assert tok.lowercase is True and tok.vocabulary_size() == 30522
    vocab = "\n".join(SPECIALS + ["a"]) + "\n"
    for name, expected in [("uncased_L-12_H-768_A-12", True), ("cased_L-12_H-768_A-12", False),
                           ("bert-base-cased", False), ("my-model", True)]:
        d = tmp_path / name
        d.mkdir()
        (d / "vocab.txt").write_text(vocab)
        assert casing_from_checkpoint(d) is expected
        assert BertTokenizer.from_pretrained(d).lowercase is expected
    d = tmp_path / "uncased_but_config_says_cased"
    d.mkdir()
    (d / "vocab.txt").write_text(vocab)
    (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert BertTokenizer.from_pretrained(d).lowercase is False


def _normal(text, lowercase=True):
    return "".join(basic_tokenize(text, lowercase))


@pytest.mark.parametrize("unit", ["byte", "char"])
def test_offsets_point_at_the_right_substrings(tok, real_sentences, unit):
    texts = real_sentences[:400] + ["Héllo, wörld! café\u0301 [SEP] 中文 ΟΔΥΣΣΕΥΣ",
                                    "a\x00b\u200bc  unaffable", "x" * 150 + " ok",
                                    "y" * 250 + "ü\u0301 ok", ""]
    ids, starts, ends = tok.tokenize_with_offsets(tf.constant(texts), unit=unit)
    assert ids.to_list() == tok(tf.constant(texts)).to_list()
    for text, row_ids, row_s, row_e in zip(texts, ids.to_list(), starts.to_list(),
                                           ends.to_list()):
        source = text.encode("utf-8") if unit == "byte" else text
        previous_end = 0
        for i, s, e in zip(row_ids, row_s, row_e):
            assert previous_end <= s < e <= len(source)
            piece = source[s:e]
            piece = piece.decode("utf-8") if unit == "byte" else piece
            token = tok.id_to_token(i)
            if token != "[UNK]":  # (a lone final sigma reads as σ out of its word)
                want = token.removeprefix("##").replace("ς", "σ")
                assert _normal(piece) == want, (text, token, piece)
            previous_end = e


def test_offsets_of_invalid_utf8_are_bytes_of_the_input(tok):
    ids, starts, ends = tok.tokenize_with_offsets(tf.constant([b"ab\xffcd ef"]))
    assert [tok.id_to_token(i) for i in ids[0].numpy()] == ["abc", "##d", "e", "##f"]
    assert starts[0].numpy().tolist() == [0, 4, 6, 7]
    assert ends[0].numpy().tolist() == [4, 5, 7, 8]


def test_runs_in_tf_function_and_tf_data(tok):
    fn = tf.function(lambda x: tok(x), input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(["hello world"])).to_list() == [[7592, 2088]]
    ds = tf.data.Dataset.from_tensor_slices(["hello world", "unaffable"]).batch(2).map(tok)
    assert next(iter(ds)).to_list() == [[7592, 2088], [14477, 20961, 3468]]


def test_config_round_trip(cased_vocab):
    tok = BertTokenizer(cased_vocab[1], lowercase=False, name="tok")
    config = tok.get_config()
    assert config["lowercase"] is False and config["vocabulary"] == cased_vocab[0]
    assert config["max_chars_per_word"] == 200
    again = BertTokenizer.from_config(config)
    text = tf.constant(["The Quick brown fox, naïvely."])
    assert again(text).to_list() == tok(text).to_list()
    assert keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(tok)).lowercase is False


def test_saved_model_export_serves_strings(tok, tmp_path):
    """The path TF Serving takes: a SavedModel signature from strings to ids."""

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.tok = tok

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            return {"token_ids": self.tok(text).to_tensor(0)}

    module = Module()
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": module.serve})
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    out = loaded.signatures["serving_default"](tf.constant(["Hello, world!"]))
    assert out["token_ids"].numpy().tolist() == [[7592, 1010, 2088, 999]]
    graph = loaded.signatures["serving_default"].graph.as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_keras_model_with_tokenizer_saves_and_loads(tok, tmp_path):
    text = keras.Input(shape=(), dtype="string")
    model = keras.Model(text, tok(text))
    model.save(tmp_path / "tok.keras")
    loaded = keras.saving.load_model(tmp_path / "tok.keras", safe_mode=True)
    sample = tf.constant(["Hello, world!", "ΟΔΥΣΣΕΥΣ"])
    assert loaded(sample).to_list() == model(sample).to_list()
