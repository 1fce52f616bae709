"""BasicTokenizer: Google's BERT text normalization and word splitting, as graph ops.

Everything of Google's tokenization before WordPiece (see `kbert.text.tokenizer` for the list):
cleaning, CJK splitting, optional lowercasing with accent stripping, punctuation splitting
(accents stripped where text is lowercased unless `strip_accents` says otherwise, as Hugging
Face's option does).
It is its own object because the vocabulary trainer needs the same words the tokenizer will see.
Normalization is one table lookup per character, which keeps every character's position in the
original string known, so offsets can be mapped back.

Known difference from Google's code (uncased only): NFD also sorts runs of combining marks by
combining class across character boundaries. Per-character normalization keeps typed order;
after accents (Mn) are stripped, only 25 spacing marks (Mc with a non-zero class: U+1D165-1D172
musical symbols, U+302E/302F Hangul tone marks, a few viramas and U+16FF0/16FF1) could still be
reordered, so ids differ only when two of these follow each other out of class order
(e.g. U+1D16D then U+1D165). No real text in the test corpora does that.
"""

from kbert.text import unicode_tables
from kbert.text.tf_libs import tf, tf_text

_NOT_FOUND = "\xff"  # never valid UTF-8, so never a real replacement string


class BasicTokenizer(tf.Module if tf else object):  # tf.Module tracks the table for export
    """Strings [batch] → normalized words [batch, None] (and what offsets need)."""

    def __init__(self, lowercase=True, strip_accents=None, name=None):
        super().__init__(name=name)
        self.lowercase = bool(lowercase)
        self.strip_accents = self.lowercase if strip_accents is None else bool(strip_accents)
        char_map = unicode_tables.char_map(self.lowercase, self.strip_accents)
        self._char_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(char_map.keys())), tf.constant(list(char_map.values()))),
            default_value=_NOT_FOUND)
        self._split_delim, self._split_keep = unicode_tables.split_pattern()
        self._sigma = unicode_tables.sigma_pattern() if self.lowercase else None

    def normalize(self, text):
        """(normalized [batch], per-character normalized strings [batch, None], their byte starts
        in `text` [batch, None]). Invalid UTF-8 sequences become U+FFFD first, then vanish."""
        chars, starts = tf.strings.unicode_split_with_offsets(
            text, "UTF-8", errors="replace", replacement_char=0xFFFD)
        flat = chars.flat_values
        mapped = self._char_table.lookup(flat)
        flat = tf.where(tf.equal(mapped, _NOT_FOUND), flat, mapped)
        norm_chars = chars.with_flat_values(flat)
        normalized = tf.strings.reduce_join(norm_chars, axis=-1)
        if self._sigma is not None:
            normalized = tf.strings.regex_replace(normalized, self._sigma, "\\1\u03c2\\3")
            normalized = tf.strings.regex_replace(normalized, "\u03a3", "\u03c3")
        return normalized, norm_chars, starts

    def split(self, normalized):
        """Normalized strings → (words, begin, end): ragged [batch, None], byte offsets into
        `normalized`."""
        return tf_text.regex_split_with_offsets(normalized, self._split_delim, self._split_keep)

    def __call__(self, text):
        """Strings [batch] → words [batch, None], exactly Google's BasicTokenizer output."""
        return self.split(self.normalize(text)[0])[0]
