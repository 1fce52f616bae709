"""`strip_accents` apart from casing, as Hugging Face's BertTokenizer has it (`None`: accents go
with lowercasing, Google's rule): kbert gives transformers' ids for every combination, reads the
setting from checkpoints, and writes it where it converts to."""

import json

import pytest
import tensorflow as tf
import transformers
from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer

import kbert

TEXTS = ["Café Über naïve résumé", "İstanbul ŞEHİR ıi", "Ångström FAÇADE ﬁne", "Tōkyō, Kraków!"]
SETTINGS = [(True, None), (True, False), (False, True), (False, None), (True, True)]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    """Every word any setting makes of TEXTS (Hugging Face's basic tokenizer), plus letters:
    so a wrong accent or case gives another id, not just [UNK]."""
    words = set()
    for lowercase, strip in SETTINGS:
        basic = BasicTokenizer(do_lower_case=lowercase, strip_accents=strip)
        words.update(w for text in TEXTS for w in basic.tokenize(text))
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
              + sorted(words - set(letters)) + letters)
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def ids(tokenizer, texts=TEXTS):
    return tokenizer(tf.constant(texts)).to_list()


@pytest.mark.parametrize("lowercase,strip", SETTINGS)
def test_every_combination_gives_transformers_ids(vocab_file, lowercase, strip):
    ours = kbert.BertTokenizer(str(vocab_file), lowercase=lowercase, strip_accents=strip)
    assert ours.strip_accents == (lowercase if strip is None else strip)
    for cls in (transformers.BertTokenizer, transformers.BertTokenizerLegacy):  # fast, Python
        theirs = cls(str(vocab_file), do_lower_case=lowercase, strip_accents=strip)
        assert ids(ours) == [theirs.encode(t, add_special_tokens=False) for t in TEXTS], cls


def test_the_setting_is_read_from_checkpoints_and_kept_by_saved_models(vocab_file, tmp_path):
    """transformers' tokenizer_config.json / tokenizer.json and keras-hub's tokenizer.json; a
    Keras config keeps it; a config saved before the option means Google's rule."""
    import keras_hub

    hf = transformers.BertTokenizer(str(vocab_file), do_lower_case=True, strip_accents=False)
    hf.save_pretrained(str(tmp_path / "hf"))
    read = kbert.BertTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert (read.lowercase, read.strip_accents) == (True, False)
    assert ids(read) == [hf.encode(t, add_special_tokens=False) for t in TEXTS]
    config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    config.pop("strip_accents", None)  # tokenizer.json's normalizer alone still says it
    (tmp_path / "hf" / "tokenizer_config.json").write_text(json.dumps(config))
    assert kbert.BertTokenizer.from_pretrained(str(tmp_path / "hf")).strip_accents is False

    vocabulary = vocab_file.read_text(encoding="utf-8").splitlines()
    hub = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True)  # keeps accents
    hub.save_to_preset(str(tmp_path / "hub"))
    read = kbert.BertTokenizer.from_pretrained(str(tmp_path / "hub"))
    assert read.strip_accents is False
    plain = [t for t in TEXTS if "ﬁ" not in t]  # keras-hub case-folds with NFKC: "ﬁ" -> "fi"
    assert ids(read, plain) == [[int(i) for i in row] for row in hub(plain)]

    restored = kbert.BertTokenizer.from_config(read.get_config())
    assert restored.strip_accents is False and ids(restored) == ids(read)
    old = {k: v for k, v in read.get_config().items() if k != "strip_accents"}
    assert kbert.BertTokenizer.from_config(old).strip_accents is True  # lowercase's


def test_a_bad_setting_is_named(vocab_file, tmp_path):
    transformers.BertTokenizer(str(vocab_file)).save_pretrained(str(tmp_path))
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "strip_accents": "no"}))
    with pytest.raises(ValueError, match="strip_accents in .* should be true, false or null"):
        kbert.BertTokenizer.from_pretrained(str(tmp_path))
