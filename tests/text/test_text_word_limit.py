"""The WordPiece word-length limit: Google's 200 characters by default, Hugging Face's 100 where a
checkpoint says so, and the 100 of earlier kbert configs kept when they are read back.

Every boundary is compared with the transcription of Google's code (reference_tokenizer.py) at
the same limit, and at 100 with Hugging Face's own tokenizer on the real MiniLM directory."""

import json
import zipfile

import keras
import pytest
import tensorflow as tf
import transformers

from kbert.text.tokenizer import BertTokenizer
from kbert.text.tokenizer_files import max_chars_from_checkpoint
from reference_tokenizer import GOOGLE_MAX_CHARS, HF_MAX_CHARS, ReferenceTokenizer

LENGTHS = [99, 100, 101, 199, 200, 201]
STEMS = ["hello", "café", "жизнь", "naïve"]  # ASCII, 2-byte letters, Cyrillic, an accent
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _word(stem, n):
    return (stem * (n // len(stem) + 1))[:n]


def _boundary_texts():
    return [f"so {_word(stem, n)} ok" for stem in STEMS for n in LENGTHS]


@pytest.mark.parametrize("limit", [GOOGLE_MAX_CHARS, HF_MAX_CHARS])
@pytest.mark.parametrize("lowercase", [True, False])
def test_boundaries_match_google_at_either_limit(uncased_vocab, limit, lowercase):
    tok = BertTokenizer(uncased_vocab, lowercase=lowercase, max_chars_per_word=limit)
    ref = ReferenceTokenizer(uncased_vocab, lowercase, max_chars=limit)
    texts = _boundary_texts()
    got = tok(tf.constant(texts)).to_list()
    assert got == [ref.encode(t) for t in texts]
    unlimited = ReferenceTokenizer(uncased_vocab, lowercase, max_chars=10**6)
    for text, ids in zip(texts, got):
        n = len(text) - len("so  ok")
        if unlimited.tokenize(text)[1:-1] != ["[UNK]"]:  # a word the vocabulary covers
            assert (ids[1:-1] == [tok.unk_token_id]) == (n > limit), (limit, text[:12], n)
    ids, starts, ends = tok.tokenize_with_offsets(tf.constant(texts), unit="char")
    assert ids.to_list() == got
    for text, s, e in zip(texts, starts.to_list(), ends.to_list()):
        if len(text) - len("so  ok") > limit:  # the one [UNK] spans the whole long word
            assert (s[1], e[1]) == (3, len(text) - 3)


@pytest.mark.parametrize("limit", [GOOGLE_MAX_CHARS, HF_MAX_CHARS])
def test_four_byte_characters_reach_the_limit(limit):
    """A word of `limit` 4-byte characters is 4 x limit bytes; the graph's byte bound must
    hold it (it was 400 bytes for every limit before)."""
    vocab = SPECIALS + ["\U0001d538", "##\U0001d538"]
    tok = BertTokenizer(vocab, lowercase=False, max_chars_per_word=limit)
    ref = ReferenceTokenizer(vocab, False, max_chars=limit)
    texts = ["\U0001d538" * n for n in (limit - 1, limit, limit + 1)]
    got = tok(tf.constant(texts)).to_list()
    assert got == [ref.encode(t) for t in texts]
    assert [len(ids) for ids in got] == [limit - 1, limit, 1]


def test_the_limit_counts_characters_after_normalization(uncased_vocab):
    """Uncased NFD splits a Hangul syllable into 3 jamo: 66 syllables are 198 characters to
    WordPiece, 67 are 201 (Google counts the normalized word too)."""
    tok = BertTokenizer(uncased_vocab)
    ref = ReferenceTokenizer(uncased_vocab, True)
    texts = ["\ud55c" * 66, "\ud55c" * 67]
    got = tok(tf.constant(texts)).to_list()
    assert got == [ref.encode(t) for t in texts]
    assert len(got[0]) > 1 and got[1] == [tok.unk_token_id]


def test_hugging_face_tokenizer_agrees_at_100(minilm_dir, uncased_vocab):
    """The real MiniLM directory: kbert reads its limit (100) and gives transformers' ids."""
    hf = transformers.BertTokenizerFast.from_pretrained(str(minilm_dir))
    tok = BertTokenizer.from_pretrained(minilm_dir)
    assert hf.backend_tokenizer.model.max_input_chars_per_word == HF_MAX_CHARS
    assert tok.max_chars_per_word == HF_MAX_CHARS
    texts = _boundary_texts()
    want = [hf(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert tok(tf.constant(texts)).to_list() == want
    assert want == [ReferenceTokenizer(uncased_vocab, True, HF_MAX_CHARS).encode(t)
                    for t in texts]
    default = BertTokenizer(uncased_vocab)(tf.constant(texts)).to_list()
    assert default != want  # words of 101-200 characters: Google's limit splits them


def _checkpoint(root, name, **files):
    d = root / name
    d.mkdir()
    (d / "vocab.txt").write_text("\n".join(SPECIALS + ["a", "##a"]) + "\n")
    for file, content in files.items():
        (d / file.replace("__", ".")).write_text(json.dumps(content))
    return d


def test_checkpoints_say_their_limit(tmp_path, minilm_dir):
    cases = [
        ("google", {"bert_config__json": {"vocab_size": 7}}, 200),
        ("bare", {}, 200),
        ("hf_config", {"tokenizer_config__json": {"do_lower_case": True}}, 100),
        ("hf_config_value", {"tokenizer_config__json": {"max_input_chars_per_word": 150}}, 150),
        ("hf_fast", {"tokenizer__json": {"model": {"max_input_chars_per_word": 120}},
                     "tokenizer_config__json": {"max_input_chars_per_word": 150}}, 120),
        ("old_kbert_run", {"kbert_tokenizer__json": {"lowercase": True}}, 100),
        ("kbert_run", {"kbert_tokenizer__json": {"max_chars_per_word": 200}}, 200),
    ]
    for name, files, want in cases:
        d = _checkpoint(tmp_path, name, **files)
        assert max_chars_from_checkpoint(d) == want, name
        assert BertTokenizer.from_pretrained(d).max_chars_per_word == want, name
    assert BertTokenizer.from_pretrained(d, max_chars_per_word=37).max_chars_per_word == 37
    limit = {name: BertTokenizer.from_pretrained(name).max_chars_per_word
             for name in ("tiny", "minilm_l6_h384_uncased", "random:minilm_l6_h384_uncased")}
    assert limit["tiny"] == GOOGLE_MAX_CHARS  # a size preset borrows a vocabulary
    assert limit["minilm_l6_h384_uncased"] == HF_MAX_CHARS
    assert limit["random:minilm_l6_h384_uncased"] == 100


def test_bad_limits_are_refused(tmp_path):
    for bad in (0, -1, True, 1.5, "200", 10**9, None):
        with pytest.raises(ValueError, match="max_chars_per_word must be a whole number"):
            BertTokenizer(SPECIALS, max_chars_per_word=bad)
    d = _checkpoint(tmp_path, "bad", tokenizer__json={"model": {"max_input_chars_per_word": -5}})
    with pytest.raises(ValueError, match=r"model.max_input_chars_per_word in '.*tokenizer.json'"):
        BertTokenizer.from_pretrained(d)
    d = _checkpoint(tmp_path, "broken")
    (d / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"tokenizer_config.json' is not valid JSON"):
        BertTokenizer.from_pretrained(d)
    (d / "tokenizer_config.json").write_text("[]")
    with pytest.raises(ValueError, match="should hold a JSON object"):
        BertTokenizer.from_pretrained(d)


def test_limit_round_trips_and_old_configs_keep_100(uncased_vocab, tmp_path):
    tok = BertTokenizer(uncased_vocab, max_chars_per_word=137)
    assert tok.get_config()["max_chars_per_word"] == 137
    text = keras.Input(shape=(), dtype="string")
    model = keras.Model(text, tok(text))
    model.save(tmp_path / "tok.keras")
    loaded = keras.saving.load_model(tmp_path / "tok.keras", safe_mode=True)
    assert loaded.layers[-1].max_chars_per_word == 137
    # A .keras file as kbert wrote it before the argument existed: no max_chars_per_word.
    with zipfile.ZipFile(tmp_path / "tok.keras") as z:
        files = {name: z.read(name) for name in z.namelist()}
    config = json.loads(files["config.json"])
    layer = next(layer for layer in config["config"]["layers"]
                 if layer["class_name"] == "BertTokenizer")
    del layer["config"]["max_chars_per_word"]
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(tmp_path / "old.keras", "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    old = keras.saving.load_model(tmp_path / "old.keras", safe_mode=True)
    assert old.layers[-1].max_chars_per_word == 100
    word = tf.constant(["x" * 120])  # over 100, within 137
    assert old(word).to_list() == [[tok.unk_token_id]]
    assert loaded(word).to_list() != [[tok.unk_token_id]]
