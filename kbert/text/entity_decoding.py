"""Token logits → word tags → entities, as graph ops (serving NER without numpy).

The same results as `decode_tags` of tests/spans/reference_conll.py (a word takes the argmax
at its first sub-token; a word with no sub-token in the window is "O") followed by
`kbert.evaluation.entities.entity_spans` (conlleval's chunk rules, which seqeval's default mode
uses, malformed tag sequences included) and the pre-redesign `tag_entities` (kept in
`tests/spans/reference_conll.py`): entity = type, first and last word → character span.

Why no loop: both chunk rules look only at a tag and the one before it, and a chunk emitted
where the end rule fires at word i spans from the last word <= i-1 where the start rule fired
(the row's first word if none) to word i-1. So each rule is one elementwise expression and the
chunk starts are one cumulative count over the batch, whatever the number of words.
"""

from kbert.text.tf_libs import tf

# Tag prefixes as conlleval reads them (the tag's first character).
_PREFIXES = {"B": 0, "I": 1, "E": 2, "S": 3, "O": 4, ".": 5}
_OTHER = 6
_START_KIND = 0  # the kind id of the empty kind before each row ("" in `entity_spans`)


def _split_tag(tag):
    """(prefix, kind) as `kbert.evaluation.entities` reads a tag."""
    if not tag:
        raise ValueError("Empty tag in label_names.")
    return tag[0], tag[1:].split("-", 1)[-1] or "_"


def _tag_tables(label_names):
    """Per class id (the extra last id is the "O" given to words outside the window): prefix
    codes, kind ids, and the kind names (id 0 is the empty start kind)."""
    names = [str(n) for n in label_names] + ["O"]
    kinds, prefixes, kind_ids = [""], [], []
    for name in names:
        prefix, kind = _split_tag(name)
        if kind not in kinds:
            kinds.append(kind)
        prefixes.append(_PREFIXES.get(prefix, _OTHER))
        kind_ids.append(kinds.index(kind))
    return (tf.constant(prefixes, tf.int32), tf.constant(kind_ids, tf.int32),
            tf.constant(kinds, tf.string), tf.constant(names, tf.string))


def word_label_ids(logits, word_index, num_words, num_classes, example_index=None):
    """Ragged int32 [batch, None]: each word's class id (argmax at its first sub-token), or
    `num_classes` for a word without a sub-token in the window (read as "O").

    `logits` [rows, seq, classes] may be shorter than `word_index` [rows, sequence_length]
    (a batch cut to its longest row); positions past `seq` must then hold no word. Rows are
    the examples themselves, or with `example_index` [rows] windows of them
    (`BertTokenPreprocessor.windows`), each word named in one row only."""
    word_index = tf.convert_to_tensor(word_index, tf.int32)
    num_words = tf.cast(num_words, tf.int64)
    rows = tf.range(tf.shape(word_index, out_type=tf.int64)[0])
    example = rows if example_index is None else tf.cast(example_index, tf.int64)
    seq = tf.shape(logits)[1]
    checks = [
        tf.debugging.assert_equal(tf.reduce_all(word_index[:, seq:] < 0), True, message=(
            "word_index has words past the logits' length: logits were cut too short")),
        tf.debugging.assert_less(tf.reduce_max(word_index, axis=1),
                                 tf.cast(tf.gather(num_words, example), tf.int32), message=(
            "word_index points past num_words")),
    ]
    with tf.control_dependencies(checks):
        word_index = tf.identity(word_index[:, :seq])
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    splits = tf.concat([[0], tf.cumsum(num_words)], 0)
    where = tf.where(word_index >= 0)
    flat_word = (tf.gather(splits, tf.gather(example, where[:, 0]))
                 + tf.cast(tf.gather_nd(word_index, where), tf.int64))
    flat = tf.tensor_scatter_nd_update(
        tf.fill([splits[-1]], tf.cast(num_classes, tf.int32)), flat_word[:, tf.newaxis],
        tf.gather_nd(predicted, where))
    return tf.RaggedTensor.from_row_splits(flat, splits)


def word_tags(logits, word_index, num_words, label_names, example_index=None):
    """Ragged string [batch, None]: `decode_tags` in the graph."""
    ids = word_label_ids(logits, word_index, num_words, len(label_names), example_index)
    return tf.gather(_tag_tables(label_names)[3], ids)


def _chunk_rules(prefix, kind, prev_prefix, prev_kind):
    """(ends, starts): `entity_spans`'s `_ends` and `_starts`, elementwise."""
    B, I, E, S, O, DOT = (_PREFIXES[k] for k in "BIESO.")
    isin = lambda x, values: tf.reduce_any(tf.stack([tf.equal(x, v) for v in values]), 0)
    new_kind = tf.not_equal(prev_kind, kind)
    ends = (isin(prev_prefix, (E, S))
            | (isin(prev_prefix, (B, I)) & isin(prefix, (B, S, O)))
            | (~isin(prev_prefix, (O, DOT)) & new_kind))
    starts = (isin(prefix, (B, S))
              | (isin(prefix, (I, E)) & isin(prev_prefix, (O, E, S)))
              | (~isin(prefix, (O, DOT)) & new_kind))
    return ends, starts


def entity_chunks(label_ids, label_names):
    """Ragged [batch, None] class ids (`word_label_ids`) → (kind ragged string, first ragged
    int64, last ragged int64): each row's chunks in order, word indices inclusive."""
    prefixes, kind_ids, kind_names, _ = _tag_tables(label_names)
    o_id = len(label_names)  # the extra "O"
    batch = label_ids.nrows()
    tail = tf.fill([batch, 1], tf.cast(o_id, label_ids.dtype))
    ids = tf.concat([label_ids, tail], axis=1)  # an "O" after each row closes its last chunk
    prefix, kind = tf.gather(prefixes, ids.flat_values), tf.gather(kind_ids, ids.flat_values)
    row_starts = ids.row_splits[:-1]
    position = tf.range(tf.size(prefix, out_type=tf.int64))
    first_of_row = tf.equal(position, tf.gather(row_starts, ids.value_rowids()))
    prev_prefix = tf.where(first_of_row, _PREFIXES["O"], tf.roll(prefix, 1, 0))
    prev_kind = tf.where(first_of_row, _START_KIND, tf.roll(kind, 1, 0))
    ends, starts = _chunk_rules(prefix, kind, prev_prefix, prev_kind)
    # A chunk ends at every `ends` position i (never a row's first): it covers i-1 back to the
    # last `starts` position at or before i-1 in the same row, else to the row's first word.
    start_positions = tf.where(starts)[:, 0]
    last_start = tf.cumsum(tf.cast(starts, tf.int64)) - 1  # index into start_positions
    end_at = tf.where(ends)[:, 0]
    before = tf.gather(last_start, end_at - 1)
    row = tf.gather(ids.value_rowids(), end_at)
    row_first = tf.gather(row_starts, row)
    begin = tf.gather(start_positions, tf.maximum(before, 0))
    begin = tf.where((before >= 0) & (begin >= row_first), begin, row_first)
    kind_of = tf.gather(kind_names, tf.gather(prev_kind, end_at))
    rows = lambda values: tf.RaggedTensor.from_value_rowids(values, row, nrows=batch)
    return rows(kind_of), rows(begin - row_first), rows(end_at - 1 - row_first)


def decode_entities(logits, word_index, word_starts, word_ends, text, label_names,
                    example_index=None):
    """Entities per input row, padded to the batch's most: `entity_text`, `entity_label`
    string [batch, max_entities] ("" padding); `entity_start`, `entity_end` int32 (character
    [start, end) in `text`, -1 padding); `entity_count` int32 [batch].

    `word_starts`/`word_ends`: ragged int32 [batch, None] character spans of the words (from
    `split_words`); their row lengths are the numbers of words. `logits` and `word_index` are
    a row per input, or windows of them with `example_index` (`word_label_ids`)."""
    num_words = word_starts.row_lengths()
    ids = word_label_ids(logits, word_index, num_words, len(label_names), example_index)
    kind, first, last = entity_chunks(ids, label_names)
    flat_first = tf.gather(word_starts.row_splits, kind.value_rowids()) + first.flat_values
    flat_last = tf.gather(word_starts.row_splits, kind.value_rowids()) + last.flat_values
    start = tf.gather(word_starts.flat_values, flat_first)
    end = tf.gather(word_ends.flat_values, flat_last)
    rows = kind.with_flat_values
    return {"entity_text": _substrings(text, rows(start), rows(end)),
            "entity_label": kind.to_tensor(""),
            "entity_start": rows(start).to_tensor(-1),
            "entity_end": rows(end).to_tensor(-1),
            "entity_count": tf.cast(kind.row_lengths(), tf.int32)}


def _substrings(text, starts, ends):
    """The characters [start, end) of each text (string [batch], valid UTF-8) for ragged int32
    [batch, None] code-point offsets: string [batch, max] ("" padding). Cut in bytes from the
    text itself, broadcast, so that a long text is neither copied nor scanned once per entity
    (gathering a 3 MB served text for each of its entities took gigabytes)."""
    _, offsets = tf.strings.unicode_decode_with_offsets(text, "UTF-8")  # bytes before each char
    byte_at = tf.concat([offsets, tf.cast(tf.strings.length(text), tf.int64)[:, tf.newaxis]],
                        axis=1)  # ... and the text's length, the end of its last character
    base = tf.gather(byte_at.row_splits, starts.value_rowids())
    to_bytes = lambda chars: starts.with_flat_values(tf.gather(  # noqa: E731
        byte_at.flat_values, base + tf.cast(chars.flat_values, tf.int64))).to_tensor(0)
    first, last = to_bytes(starts), to_bytes(ends)
    return tf.strings.substr(text[:, tf.newaxis], first, last - first)
