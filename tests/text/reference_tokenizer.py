"""A plain-Python statement of Google's original BERT tokenization, the yardstick for kbert.

Written from the algorithm's description, word by word and character by character, with no
tables and no TensorFlow, so that it can be read and trusted on its own:

  bytes → UTF-8 decode dropping invalid bytes → delete NUL / U+FFFD / Cc / Cf (keeping \\t \\n \\r)
  and turn whitespace (\\t \\n \\r, Zs) into spaces → pad CJK ideographs with spaces → split on
  whitespace (`str.split`) → per word: if uncased, `str.lower`, NFD, drop Mn → split off every
  punctuation character (P*, or ASCII 33-47 58-64 91-96 123-126) → greedy longest-match-first
  WordPiece with "##" continuations; [UNK] for a word of more than 100 characters or a word that
  cannot be covered.
"""

import unicodedata

CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def _control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _space(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _cjk(ch):
    return any(lo <= ord(ch) <= hi for lo, hi in CJK)


def basic_tokenize(text, lowercase):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "ignore")
    cleaned = []
    for ch in text:
        if ord(ch) in (0, 0xFFFD) or _control(ch):
            continue
        cleaned.append(" " if _space(ch) else ch)
    spaced = "".join(f" {ch} " if _cjk(ch) else ch for ch in cleaned)
    pieces = []
    for word in spaced.split():
        if lowercase:
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(ch for ch in word if unicodedata.category(ch) != "Mn")
        current = ""
        for ch in word:
            if _punct(ch):
                if current:
                    pieces.append(current)
                pieces.append(ch)
                current = ""
            else:
                current += ch
        if current:
            pieces.append(current)
    return " ".join(pieces).split()


def wordpiece(word, vocab, unk="[UNK]", max_chars=100):
    if len(word) > max_chars:
        return [unk]
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk]
        out.append(piece)
        start = end
    return out


class ReferenceTokenizer:
    def __init__(self, tokens, lowercase):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.lowercase = lowercase

    def tokenize(self, text):
        return [p for w in basic_tokenize(text, self.lowercase) for p in wordpiece(w, self.vocab)]

    def encode(self, text):
        return [self.vocab[t] for t in self.tokenize(text)]


def truncate_pair(a, b, max_length):
    """Google's `_truncate_seq_pair`: drop from the end of the longer list, `b` on a tie."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_length:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b
