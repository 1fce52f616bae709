"""kbert's in-graph BertTokenizer against a plain-Python statement of Google's algorithm.

The bar is 100% identical ids on real sentences and on hostile random Unicode, cased and uncased.
"""

import random

import pytest
import tensorflow as tf

from kbert.text.tokenizer import BertTokenizer
from reference_tokenizer import ReferenceTokenizer

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    " \t\n\r\x0b\x0c\u00a0\u1680\u2000\u2007\u200a\u202f\u205f\u3000\u2028\u2029\x85\x1c\x1f",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡§«»¿‐–—‘’“”…‹›「」。、・﹏",
    "".join(map(chr, range(0x4E00, 0x4E60))) + "中文字漢語日本語한국어ひらがなカタカナ㐀"
    "\uf900\ufa2d\U00020000\U0002a700\U0002b740\U0002b820\U0002f800\U0002fa1d\U00030000",
    "".join(map(chr, range(0x600, 0x6FF))),  # Arabic, with its combining marks
    "".join(map(chr, range(0x900, 0x97F))),  # Devanagari
    "😀👍🏽👨\u200d👩\u200d👧🇫🇷❤️✨🎉🧑🏿\u200d🚀",
    "".join(map(chr, range(0x300, 0x370))) + "\u1ab0\u20d0\ufe20",  # combining marks
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u202e\u2066\x00\ufffd\x01\x07\x1b\x7f\x80\x9f",
    "ΑΒΓΔΣσςΟΔΥΣΣΕΥΣάέΆΈΐ'.·\u0345",
    "ÀÉÎÕÜçñßİıǅǈẞﬁﬀ½²ℌΩKÅ≠≮≯\u1fef\u1fed\u037e\u0387\u0340åÅ",
    "\ue000\U000f0000\u0378\U0001d16d\U0001d165",  # private use, unassigned, musical marks
]
SNIPPETS = ["[SEP]", "[CLS] x [MASK]", "[UNK]", "##ing", "ΟΔΥΣΣΕΥΣ", "ΑΣ'Σ", "ΑΣ.ΒΣ", " ΣΑΣ ",
            "x" * 100, "y" * 101, "é" * 100, "ä" * 101, "z" * 200, "ö" * 201, "unaffable", "İstanbul", "straße",
            "don't", "U.S.A.", "e-mail", "3.14", "C++", "naïve café", "北京大学"]


def random_texts(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 30)):
            r = rng.random()
            if r < 0.05:
                cp = rng.randrange(0x110000)
                parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "?")
            elif r < 0.15:
                parts.append(rng.choice(SNIPPETS))
            else:
                parts.append(rng.choice(rng.choice(POOLS)))
        out.append("".join(parts))
    return out + ["", " ", "\t\n\r", "\x00", "\ufffd", "\u200b", "Σ", "ΑΣ", "\u0301a"]


def agreement(vocab, lowercase, texts):
    tokenizer = BertTokenizer(vocab, lowercase=lowercase)
    reference = ReferenceTokenizer(vocab, lowercase)
    got = tokenizer(tf.constant(texts)).to_list()
    differ = [(t, g) for t, g in zip(texts, got) if g != reference.encode(t)]
    rate = 1 - len(differ) / len(texts)
    return rate, differ, tokenizer, reference


def explain(differ, tokenizer, reference):
    lines = []
    for text, got in differ[:5]:
        lines.append(f"{text!r}\n  kbert:     {[tokenizer.id_to_token(i) for i in got]}"
                     f"\n  reference: {reference.tokenize(text)}")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_real_sentences_match_google(casing, real_sentences, uncased_vocab, cased_vocab):
    vocab = uncased_vocab if casing == "uncased" else cased_vocab[0]
    rate, differ, tok, ref = agreement(vocab, casing == "uncased", real_sentences)
    print(f"\n{casing}: {len(real_sentences)} real sentences, agreement {rate:.2%}")
    assert not differ, explain(differ, tok, ref)


@pytest.mark.slow
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_random_unicode_matches_google(casing, uncased_vocab, cased_vocab):
    vocab = uncased_vocab if casing == "uncased" else cased_vocab[0]
    texts = random_texts(3000, seed=7 if casing == "uncased" else 8)
    rate, differ, tok, ref = agreement(vocab, casing == "uncased", texts)
    print(f"\n{casing}: {len(texts)} random Unicode strings, agreement {rate:.2%}")
    assert not differ, explain(differ, tok, ref)


def test_invalid_utf8_matches_google_ignore(uncased_vocab):
    """Google decodes bytes with errors="ignore"; kbert drops each invalid sequence too."""
    texts = [b"caf\xc3", b"ab\xffcd", b"x\xe2\x82y", b"\xed\xa0\x80z", b"\xc0\xafslash",
             b"\xf4\x90\x80\x80big", b"ok \xe4\xb8 \xe4\xb8\xad", b"\x80\x80\x80", b"\xf0\x9f\x98"]
    tok = BertTokenizer(uncased_vocab)
    ref = ReferenceTokenizer(uncased_vocab, True)
    got = tok(tf.constant(texts)).to_list()
    assert got == [ref.encode(t) for t in texts]
    assert got[1] == ref.encode("abcd")


@pytest.mark.xfail(strict=True, reason="known difference: canonical reordering of spacing "
                   "combining marks across characters (see BasicTokenizer docs)")
def test_known_difference_reordering_of_spacing_combining_marks(uncased_vocab):
    """Uncased NFD reorders combining marks by combining class across character boundaries.
    kbert normalizes one character at a time; after accents (Mn) are stripped the only marks
    left that could be reordered are 25 spacing marks (Mc with a non-zero combining class:
    U+1D165-1D172 musical symbols, U+302E/302F Hangul tone marks, some viramas). Two of them in
    a row out of class order, e.g. U+1D16D then U+1D165, come out in typed order in kbert and
    swapped in Google's code."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##\U0001d16d", "##\U0001d165",
             "##b"]
    text = "a\U0001d16d\U0001d165b"
    got = BertTokenizer(vocab)(tf.constant([text])).to_list()[0]
    assert got == [5, 6, 7, 8]  # kbert keeps the typed order
    assert got == ReferenceTokenizer(vocab, True).encode(text)  # Google: [5, 7, 6, 8]


@pytest.mark.parametrize("lowercase,strip_accents",
                         [(True, None), (False, None), (True, False), (False, True)])
def test_per_character_normalization_is_sound(lowercase, strip_accents):
    """What makes normalizing one character at a time equal Google's per-word normalization."""
    from kbert.text import unicode_tables

    assert unicode_tables.check_invariants(lowercase, strip_accents) == []
