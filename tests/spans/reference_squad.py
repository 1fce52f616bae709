"""The numpy transcription of Google's run_squad.py windowing and decoding that kbert used
before its graph ops (moved here unchanged from `kbert/data/squad.py`): the reference that
`kbert.text.span_preprocessor` and `kbert.text.span_decoding` are tested against.

Features (`squad_features`), as in Google's `run_squad.py`: the question is cut to
`max_query_length` sub-tokens, the context into windows of the room left in `sequence_length`
([CLS] question [SEP] window [SEP]), successive windows starting `doc_stride` sub-tokens apart.
Each feature keeps, for its context tokens, the character span of the token and whether this
window is the token's "max context" one. The training target is the answer's first and last
sub-token, or [CLS] (position 0) when the window does not hold the whole answer.

Decoding (`decode_answers`): per window, the `n_best` highest start and end logits are paired;
a pair is kept when both are context tokens of that window, start <= end, the span is at most
`max_answer_length` sub-tokens and the start token has its max context in the window. The best
kept pair over all windows is the answer. For v2.0 the null answer is scored at [CLS] and wins
when null score - best non-null score > `null_threshold`.
"""

import numpy as np

from kbert.data.squad import SquadExample  # noqa: F401  (re-exported for the tests)


FEATURE_KEYS = ("token_ids", "segment_ids", "padding_mask")


def _tokenize(tokenizer, texts):
    import tensorflow as tf

    if not texts:
        return [], [], []
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts, tf.string), "char")
    return ids.to_list(), starts.to_list(), ends.to_list()


def check_lengths(sequence_length, max_query_length, doc_stride):
    if max_query_length < 1 or doc_stride < 1:
        raise ValueError(f"max_query_length and doc_stride must be positive, got "
                         f"{max_query_length} and {doc_stride}.")
    if sequence_length - max_query_length - 3 < 1:
        raise ValueError(f"sequence_length={sequence_length} leaves no room for the context "
                         f"after a question of max_query_length={max_query_length} sub-tokens "
                         "and [CLS]/[SEP]/[SEP]; raise sequence_length or lower "
                         "max_query_length.")


def squad_features(examples, tokenizer, sequence_length=384, doc_stride=128,
                   max_query_length=64):
    """Windowed features for `examples` (see the module docstring).

    Returns a dict of numpy arrays, one row per feature (window):
      token_ids, segment_ids, padding_mask, token_start, token_end, max_context
        [features, sequence_length] (token_start/end: the char span of each context token in
        its context, -1 elsewhere; max_context: 1 where this window is the token's best one);
      start_positions, end_positions [features]: the training target (0 = [CLS]);
      example_index [features]: the example each feature came from;
      answer_in_window [features]: 1 when the window holds the whole (first) answer;
    and `unmappable`: ids of answerable examples whose answer covers no sub-token.
    """
    check_lengths(sequence_length, max_query_length, doc_stride)
    contexts = sorted({e.context for e in examples})
    context_index = {c: i for i, c in enumerate(contexts)}
    c_ids, c_starts, c_ends = _tokenize(tokenizer, contexts)
    q_ids, _, _ = _tokenize(tokenizer, [e.question for e in examples])
    rows = {k: [] for k in FEATURE_KEYS + ("token_start", "token_end", "max_context")}
    start_positions, end_positions, example_index, in_window = [], [], [], []
    unmappable = []
    for n, example in enumerate(examples):
        question = q_ids[n][:max_query_length]
        c = context_index[example.context]
        ids, starts, ends = c_ids[c], c_starts[c], c_ends[c]
        answer = None
        if example.answers:
            text, char_start = example.answers[0]
            char_end = char_start + len(text)
            covered = [i for i, (s, e) in enumerate(zip(starts, ends))
                       if e > char_start and s < char_end]
            if covered:
                answer = (covered[0], covered[-1])
            else:
                unmappable.append(example.id)
        room = sequence_length - len(question) - 3
        windows, begin = [], 0
        while True:
            length = min(len(ids) - begin, room)
            windows.append((begin, length))
            if begin + length >= len(ids):
                break
            begin += min(length, doc_stride)
        # For each context token, the window where it has the most context (first on ties).
        best = np.full(len(ids), -1)
        best_score = np.full(len(ids), -np.inf)
        for w, (begin, length) in enumerate(windows):
            positions = np.arange(begin, begin + length)
            score = np.minimum(positions - begin, begin + length - 1 - positions) + 0.01 * length
            better = score > best_score[positions]
            best[positions[better]] = w
            best_score[positions[better]] = score[better]
        offset = len(question) + 2  # [CLS] question [SEP]
        for w, (begin, length) in enumerate(windows):
            token_ids = np.zeros(sequence_length, "int32")
            segment_ids = np.zeros(sequence_length, "int32")
            token_start = np.full(sequence_length, -1, "int32")
            token_end = np.full(sequence_length, -1, "int32")
            max_context = np.zeros(sequence_length, "int32")
            packed = ([tokenizer.cls_token_id] + question + [tokenizer.sep_token_id]
                      + ids[begin:begin + length] + [tokenizer.sep_token_id])
            token_ids[:len(packed)] = packed
            segment_ids[offset:len(packed)] = 1
            token_start[offset:offset + length] = starts[begin:begin + length]
            token_end[offset:offset + length] = ends[begin:begin + length]
            max_context[offset:offset + length] = best[begin:begin + length] == w
            padding_mask = (np.arange(sequence_length) < len(packed)).astype("int32")
            inside = answer is not None and begin <= answer[0] and answer[1] < begin + length
            for key, value in (("token_ids", token_ids), ("segment_ids", segment_ids),
                               ("padding_mask", padding_mask), ("token_start", token_start),
                               ("token_end", token_end), ("max_context", max_context)):
                rows[key].append(value)
            start_positions.append(answer[0] - begin + offset if inside else 0)
            end_positions.append(answer[1] - begin + offset if inside else 0)
            example_index.append(n)
            in_window.append(int(inside))
    features = {k: np.stack(v) if v else np.zeros((0, sequence_length), "int32")
                for k, v in rows.items()}
    features.update({
        "start_positions": np.asarray(start_positions, "int32"),
        "end_positions": np.asarray(end_positions, "int32"),
        "example_index": np.asarray(example_index, "int32"),
        "answer_in_window": np.asarray(in_window, "int32"),
        "unmappable": unmappable,
    })
    return features


def training_features(examples, features):
    """The features to train on: all, except those of answerable examples whose answer could
    not be mapped onto sub-tokens (they would teach "no answer")."""
    if not features["unmappable"]:
        return features
    bad = {i for i, e in enumerate(examples) if e.id in set(features["unmappable"])}
    keep = np.array([i not in bad for i in features["example_index"]])
    return {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in features.items()}


def span_dataset(features, batch_size=32, shuffle=False, repeat=False, seed=0,
                 with_labels=True):
    """tf.data of (inputs, {"start_logits": start, "end_logits": end}) batches (inputs only
    with `with_labels=False`), each batch cut to its longest sequence."""
    import tensorflow as tf

    inputs = {k: features[k] for k in FEATURE_KEYS}
    if with_labels:
        labels = {"start_logits": features["start_positions"],
                  "end_logits": features["end_positions"]}
        dataset = tf.data.Dataset.from_tensor_slices((inputs, labels))
    else:
        dataset = tf.data.Dataset.from_tensor_slices((inputs,))
    if shuffle:
        dataset = dataset.shuffle(len(features["token_ids"]), seed=seed,
                                  reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size)

    def cut(x, *y):
        longest = tf.reduce_max(tf.reduce_sum(x["padding_mask"], -1))
        return ({k: v[:, :longest] for k, v in x.items()},) + y

    return dataset.map(cut, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def predict_logits(model, features, batch_size=64):
    """(start_logits, end_logits) [features, sequence_length] (padded back to full length)."""
    length = features["token_ids"].shape[1]
    starts, ends = [], []
    for (x,) in span_dataset(features, batch_size, with_labels=False):
        out = model(x, training=False)
        pad = [(0, 0), (0, length - int(x["token_ids"].shape[1]))]
        starts.append(np.pad(np.asarray(out["start_logits"], "float32"), pad,
                             constant_values=-1e4))
        ends.append(np.pad(np.asarray(out["end_logits"], "float32"), pad,
                           constant_values=-1e4))
    if not starts:
        return np.zeros((0, length), "float32"), np.zeros((0, length), "float32")
    return np.concatenate(starts), np.concatenate(ends)


# ------------------------------------------------------------------------------ decoding

def _best_span(start_logits, end_logits, token_start, max_context, n_best, max_answer_length):
    """(score, start, end) of the best valid span of one window, or None."""
    valid = token_start >= 0
    k = min(n_best, len(start_logits))
    starts = np.argsort(-start_logits, kind="stable")[:k]
    ends = np.argsort(-end_logits, kind="stable")[:k]
    s, e = np.meshgrid(starts, ends, indexing="ij")
    ok = (valid[s] & valid[e] & (max_context[s] > 0) & (e >= s)
          & (e - s + 1 <= max_answer_length))
    if not ok.any():
        return None
    scores = np.where(ok, start_logits[s] + end_logits[e], -np.inf)
    i, j = np.unravel_index(np.argmax(scores), scores.shape)
    return float(scores[i, j]), int(s[i, j]), int(e[i, j])


def decode_answers(examples, features, start_logits, end_logits, version="1.1", n_best=20,
                   max_answer_length=30, null_threshold=0.0):
    """Answer text for every example from the windows' logits (see module docstring).

    Returns (predictions, details): predictions maps id → answer text ("" = no answer, v2.0
    only); details maps id → {"text", "start", "end" (char span in the context; -1 for no
    answer), "score", "null_score", "null_score_diff", "best_text" (the best non-null text)}.
    """
    if str(version) not in ("1.1", "2.0"):
        raise ValueError(f"version must be '1.1' or '2.0', got {version!r}.")
    per_example = {}
    for f, n in enumerate(features["example_index"]):
        per_example.setdefault(int(n), []).append(f)
    predictions, details = {}, {}
    for n, example in enumerate(examples):
        best, null_score = None, np.inf
        for f in per_example.get(n, []):
            null_score = min(null_score, float(start_logits[f][0] + end_logits[f][0]))
            found = _best_span(start_logits[f], end_logits[f], features["token_start"][f],
                               features["max_context"][f], n_best, max_answer_length)
            if found is not None and (best is None or found[0] > best[0]):
                char_start = int(features["token_start"][f][found[1]])
                char_end = int(features["token_end"][f][found[2]])
                best = (found[0], char_start, char_end)
        if best is None:
            text, start, end, score = "", -1, -1, None
        else:
            score, start, end = best
            text = example.context[start:end]
        diff = None if best is None else null_score - score
        entry = {"text": text, "start": start, "end": end, "score": score,
                 "null_score": null_score if np.isfinite(null_score) else None,
                 "null_score_diff": diff, "best_text": text}
        if str(version) == "2.0" and (best is None or diff > null_threshold):
            entry.update(text="", start=-1, end=-1)
        predictions[example.id] = entry["text"]
        details[example.id] = entry
    return predictions, details
