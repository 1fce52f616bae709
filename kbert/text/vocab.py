"""WordPiece vocabulary training, laid out like Google's BERT vocabularies.

Words are counted with kbert's own `BasicTokenizer`, so the trainer sees exactly the words the
tokenizer will later split; the pieces are chosen by tensorflow-text's WordPiece learner (the
top-down algorithm Google used). The file starts with the layout BERT code relies on:
[PAD] = 0, [unused0]..[unused{n-1}] = 1..n (room for task tokens without resizing the
embeddings), then [UNK], [CLS], [SEP], [MASK]; with Google's 99 unused tokens those are ids
100, 101, 102, 103. Then every single character (and its ## form) and the learned pieces.
"""

import collections

from kbert.outputs import write_text
from kbert.text.basic_tokenizer import BasicTokenizer
from kbert.text.tf_libs import require_tensorflow, tf


def reserved_tokens(num_unused=99):
    """[PAD], [unused0..num_unused-1], [UNK], [CLS], [SEP], [MASK] — Google's first ids.

    Args:
      num_unused: how many [unusedN] tokens to reserve.

    Returns:
      A list of `num_unused + 5` tokens.

    Examples:
        >>> from kbert.text.vocab import reserved_tokens
        >>> reserved_tokens(2)
        ['[PAD]', '[unused0]', '[unused1]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
        >>> reserved_tokens().index("[CLS]")
        101
    """
    return (["[PAD]"] + [f"[unused{i}]" for i in range(num_unused)]
            + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])


def _batches(texts, batch_size):
    if isinstance(texts, tf.data.Dataset):
        if texts.element_spec.shape.rank == 0:
            texts = texts.batch(batch_size)
        for batch in texts:
            yield batch
        return
    if isinstance(texts, (str, bytes)):
        raise TypeError("train_vocabulary takes an iterable of strings, not a single string.")
    batch = []
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            yield tf.constant(batch)
            batch = []
    if batch:
        yield tf.constant(batch)


def count_words(texts, lowercase=True, batch_size=256):
    """How often each word occurs, words as `BertTokenizer` splits them before WordPiece.

    Args:
      texts: an iterable of strings, or a tf.data.Dataset of strings (scalars or batches).
      lowercase: count lowercased, accent-free words (an uncased vocabulary's).
      batch_size: the strings split at a time.

    Returns:
      A dict {word: count}.

    Examples:
        >>> from kbert.text.vocab import count_words
        >>> sorted(count_words(["The cat.", "the Café"]).items())
        [('.', 1), ('cafe', 1), ('cat', 1), ('the', 2)]
    """
    basic = BasicTokenizer(lowercase)
    split = tf.function(lambda t: basic(t).flat_values,
                        input_signature=[tf.TensorSpec([None], tf.string)])
    counts = collections.Counter()
    for batch in _batches(texts, batch_size):
        counts.update(split(batch).numpy().tolist())
    return {w.decode("utf-8"): c for w, c in counts.items()}


def train_vocabulary(texts, vocab_size=30522, lowercase=True, output_path=None,
                     num_unused=99, max_unique_chars=1000, min_count=2, max_token_length=50):
    """Learns a WordPiece vocabulary from `texts`, laid out like Google's BERT vocabularies.

    Words are counted as `BertTokenizer` splits them, and the pieces chosen by tensorflow-text's
    WordPiece learner. The vocabulary starts with [PAD], the [unusedN] tokens, [UNK], [CLS],
    [SEP] and [MASK] (ids 100 to 103 with Google's 99 unused), then every single character and
    its ## form, then the learned pieces.

    Args:
      texts: an iterable of strings, or a tf.data.Dataset of strings (scalars or batches).
      vocab_size: the size including reserved tokens. The result has exactly this many
        tokens unless the corpus has too few word pieces seen `min_count` times (then fewer:
        compare `len(result)`).
      lowercase: learn an uncased vocabulary (use the same flag for the tokenizer).
      output_path: where to write vocab.txt (one token per line), if given.
      num_unused: how many [unusedN] tokens to reserve (Google: 99 before [UNK]).
      max_unique_chars: the alphabet size; rarer characters are left out (they become [UNK]).
      min_count: the lowest frequency the learner's threshold search may go to.
      max_token_length: words longer than this (in characters) are not counted.

    Returns:
      The list of tokens, each at the index of its id.

    Examples:
        >>> import os, tempfile
        >>> import kbert
        >>> texts = ["the quick brown fox jumps over the lazy dog", "the dog sleeps"] * 3
        >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> vocabulary = kbert.train_vocabulary(texts, vocab_size=70, num_unused=0, min_count=1,
        ...                                     output_path=path)
        >>> vocabulary[:5]
        ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
        >>> len(vocabulary) <= 70, "quick" in vocabulary
        (True, True)
        >>> tokenizer = kbert.BertTokenizer(path)
        >>> [tokenizer.id_to_token(i) for i in tokenizer("The quickest dogs").numpy().tolist()]
        ['the', 'quick', '##e', '##s', '##t', 'dog', '##s']
    """
    require_tensorflow("train_vocabulary")
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(f"vocab_size {vocab_size} leaves no room after the "
                         f"{len(reserved)} reserved tokens.")
    counts = count_words(texts, lowercase)
    if not counts:
        raise ValueError("train_vocabulary: the corpus has no words.")
    vocab = _largest_at_least(counts, vocab_size, reserved, min_count, max_token_length,
                              max_unique_chars)
    vocab = _without_rarest_pieces(vocab, len(vocab) - vocab_size, set(reserved))
    if output_path is not None:
        write_text(output_path, "".join(t + "\n" for t in vocab))
    return vocab


def _without_rarest_pieces(vocab, count, reserved):
    """`vocab` less its `count` rarest learned pieces. The learner orders pieces by count, but
    never drops reserved tokens, single characters or their ## forms: without them some words
    could not be spelled at all (they come late in its order, a cut of the tail would)."""
    def essential(token):
        return token in reserved or len(token) == 1 or (token.startswith("##") and len(token) == 3)

    droppable = [i for i, token in enumerate(vocab) if not essential(token)]
    if count > len(droppable):
        raise ValueError(f"vocab_size {len(vocab) - count} is below the "
                         f"{len(vocab) - len(droppable)} tokens this corpus needs (the reserved "
                         "tokens, every character and its ## form); ask for more, or lower "
                         "max_unique_chars.")
    dropped = set(droppable[len(droppable) - count:]) if count > 0 else set()
    return [token for i, token in enumerate(vocab) if i not in dropped]


def _largest_at_least(counts, vocab_size, reserved, min_count, max_token_length,
                      max_unique_chars):
    """The learner's vocabulary at the highest count threshold that still gives `vocab_size`
    tokens (at `min_count` when none does), so that cutting its tail gives exactly
    `vocab_size`. tensorflow-text's own search stops anywhere within 5% below its target."""
    # Imported on use: the text package loads where tensorflow-text is missing (kbert.text.tf_libs).
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    cache = {}

    def at(threshold):
        if threshold not in cache:
            cache[threshold] = learner.learn(
                counts, vocab_size=vocab_size, reserved_tokens=reserved,
                lower_thresh=threshold, upper_thresh=threshold,
                max_token_length=max_token_length, max_unique_chars=max_unique_chars,
                include_joiner_token=True, joiner="##")
        return [t for t in cache[threshold] if t and t != "##"]  # a bare "##" never occurs

    # One full pass per threshold tried. Every word counted at least `threshold` times stays
    # whole, so the threshold lies near the count of the vocab_size-th most frequent word:
    # 4× that count bounds it in practice (checked: doubled until too few tokens come out).
    ranked = sorted(counts.values(), reverse=True)
    low = min_count
    high = max(low + 1, 4 * ranked[min(vocab_size, len(ranked)) - 1] + 8)
    while len(at(high)) >= vocab_size and high <= ranked[0]:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if len(at(middle)) >= vocab_size else (low, middle)
    return at(low)
