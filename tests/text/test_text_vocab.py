"""The WordPiece vocabulary trainer: Google's layout and a vocabulary that actually covers text."""

import pytest
import tensorflow as tf

from kbert.text.tokenizer import BertTokenizer
from kbert.text.tokenizer_files import load_vocabulary
from kbert.text.vocab import reserved_tokens, train_vocabulary


def test_reserved_layout(cased_vocab):
    tokens, path = cased_vocab
    assert tokens[0] == "[PAD]"
    assert tokens[1:100] == [f"[unused{i}]" for i in range(99)]
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(tokens) == 5000  # exactly the size asked for: the corpus has enough pieces
    assert len(set(tokens)) == len(tokens)
    assert load_vocabulary(path) == tokens  # the written vocab.txt reads back identically
    tok = BertTokenizer(path, lowercase=False)
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id,
            tok.mask_token_id) == (0, 100, 101, 102, 103)


def test_held_out_text_has_few_unknowns(cased_vocab, wiki_articles):
    tok = BertTokenizer(cased_vocab[0], lowercase=False)
    ids = tok(tf.constant(wiki_articles[6000:6500])).flat_values.numpy()
    unk_rate = (ids == tok.unk_token_id).mean()
    print(f"\nheld-out [UNK] rate: {unk_rate:.4%} of {ids.size} tokens")
    assert unk_rate < 0.005
    assert any(t.startswith("##") for t in cased_vocab[0])


def test_uncased_from_tf_data_and_custom_layout(tmp_path):
    text = ["The Café serves naïve Crème brûlée. " * 3, "Un café, s'il vous plaît!"] * 20
    ds = tf.data.Dataset.from_tensor_slices(text)
    tokens = train_vocabulary(ds, vocab_size=200, lowercase=True, num_unused=3)
    assert tokens[:8] == reserved_tokens(3) == ["[PAD]", "[unused0]", "[unused1]", "[unused2]",
                                                "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "é" not in tokens and "caf" in "".join(tokens)  # accents stripped, lowercased
    tok = BertTokenizer(tokens, lowercase=True)
    assert tok.unk_token_id not in tok(tf.constant(text)).flat_values.numpy()


def test_errors():
    with pytest.raises(ValueError, match="no room"):
        train_vocabulary(["a b c"], vocab_size=50)
    with pytest.raises(ValueError, match="no words"):
        train_vocabulary(["", "  "], vocab_size=500)
    with pytest.raises(TypeError, match="iterable of strings"):
        train_vocabulary("just one string", vocab_size=500)


def test_exact_size_keeps_every_character_and_its_suffix_form():
    """The learner lists single-character ## pieces after the learned words: a cut to the
    asked size drops the rarest words, never those (else words could not be spelled)."""
    text = [f"Sentence {i} of document {d} is about topic {d % 3}." for d in range(40)
            for i in range(6)]
    tokens = train_vocabulary(text, vocab_size=170)
    assert len(tokens) == 170 and {"document", "about", "topic"} <= set(tokens)
    letters = set("".join(text).lower()) - {" "}
    assert letters <= set(tokens) and {"##" + c for c in letters} <= set(tokens)
    tok = BertTokenizer(tokens, lowercase=True)
    assert tok.unk_token_id not in tok(tf.constant(text)).flat_values.numpy()
    with pytest.raises(ValueError, match="vocab_size 150 is below the 154 tokens"):
        train_vocabulary(text, vocab_size=150)
