"""What each task's serving signatures return (see `kbert.export.signatures` for the table
and the output names): `*_outputs(outputs, features, label_names)` turn the model's outputs
into the signature's tensors; `serve_entities`, `serve_spans` and `serve_fill_mask` replace
the whole text path for the tasks whose answers are read off the text itself, and
`fill_mask_ids` the token-id path of a masked LM."""

import tensorflow as tf

from kbert.config import INPUT_KEYS
from kbert.text.trim import trim_to_longest


def classifier_outputs(outputs, features, label_names):
    logits = tf.cast(outputs, tf.float32)
    if logits.shape[-1] == 1:
        return {"score": logits[:, 0]}
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"label_id": label_id, "label": tf.gather(label_names, label_id),
            "probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits}


def choice_outputs(outputs, features, label_names):
    logits = tf.cast(outputs, tf.float32)
    return {"label_id": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits}


def embedding_outputs(outputs, features, label_names):
    sequence = tf.cast(outputs["sequence_output"], tf.float32)
    mask = features["padding_mask"]
    weights = tf.cast(mask, tf.float32)[:, :, tf.newaxis]
    count = tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
    return {"pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "mean_pooled_output": tf.reduce_sum(sequence * weights, axis=1) / count,
            "sequence_output": sequence, "padding_mask": mask}


def feature_outputs(outputs, features, label_names):
    return {"features": tf.cast(outputs, tf.float32), "padding_mask": features["padding_mask"]}


def token_outputs(outputs, features, label_names):
    logits = tf.cast(outputs, tf.float32)
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"label_id": label_id, "label": tf.gather(label_names, label_id),
            "probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "padding_mask": features["padding_mask"]}


def serve_entities(module, text):
    """Raw text → words → windows of them → the model's logits → entities, all in the graph.
    The export's `BertPreprocessor` lends its tokenizer (already tracked) and sequence
    length."""
    from kbert.text.entity_decoding import decode_entities
    from kbert.text.token_preprocessor import BertTokenPreprocessor

    pre = module.preprocessor
    if not isinstance(pre, BertTokenPreprocessor):
        pre = BertTokenPreprocessor(pre.tokenizer, pre.sequence_length)
    words, starts, ends, text = pre.split_text(text, pre.max_context_length)
    windows = pre.windows(words)
    features = {k: windows[k] for k in INPUT_KEYS + ("word_index",)}
    features = trim_to_longest(features) if module.trim_padding else features
    logits = module.model({k: features[k] for k in INPUT_KEYS}, training=False)
    return decode_entities(tf.cast(logits, tf.float32), features["word_index"], starts, ends,
                           text, module.label_names, windows["example_index"])


def fill_mask_ids(module, features):
    """Token ids with [MASK] ids at the blanks → each blank's `top_k` likeliest pieces
    (`fill_blanks`)."""
    from kbert.text.fill_mask_preprocessor import blank_positions

    positions = blank_positions(features["token_ids"], module.preprocessor.tokenizer.mask_token_id)
    return fill_blanks(module, features, positions)


def serve_fill_mask(module, text):
    """Text with [MASK] blanks → each blank's `top_k` likeliest pieces, and `filled`: the
    text with each blank replaced by its likeliest piece ("##" dropped), as
    `kbert.tasks.fill_mask.fill_mask` answers."""
    from kbert.text.fill_mask_preprocessor import BertFillMaskPreprocessor

    pre = BertFillMaskPreprocessor(module.preprocessor.tokenizer,
                                   module.preprocessor.sequence_length)
    features = pre(text)
    inputs = {k: features[k] for k in INPUT_KEYS}
    inputs = trim_to_longest(inputs) if module.trim_padding else inputs
    answers = fill_blanks(module, inputs, features["masked_positions"])
    pieces = tf.strings.split(text, sep=pre.marker)  # [batch, (blanks + 1)]
    words = tf.strings.regex_replace(answers["token"][:, :, 0], "^##", "")
    words = tf.RaggedTensor.from_tensor(words, lengths=answers["blank_count"])
    words = tf.concat([words, tf.RaggedTensor.from_tensor(tf.fill([tf.shape(text)[0], 1],
                                                                  ""))], axis=1)
    filled = pieces.with_flat_values(tf.strings.join([pieces.flat_values, words.flat_values]))
    return {**answers, "filled": tf.strings.reduce_join(filled, axis=1)}


def fill_blanks(module, features, positions):
    """The masked LM's `module.top_k` likeliest pieces at `positions` [batch, blanks] (0 where
    a row has fewer blanks): `token` string, `token_id` int32 and `score` float32 (softmax
    probability) [batch, blanks, top_k], likeliest first ("", -1 and 0 past a row's blanks),
    and `blank_count` int32 [batch]."""
    logits = module.model({**features, "masked_positions": positions}, training=False)["mlm"]
    scores, ids = tf.math.top_k(tf.nn.softmax(tf.cast(logits, tf.float32)), module.top_k)
    real = tf.greater(positions, 0)
    blank = real[:, :, tf.newaxis]
    return {"token": tf.where(blank, tf.gather(module.vocabulary, ids), ""),
            "token_id": tf.where(blank, ids, -1), "score": tf.where(blank, scores, 0.0),
            "blank_count": tf.reduce_sum(tf.cast(real, tf.int32), axis=1)}


def span_outputs(outputs, features, label_names):
    return {"start_logits": tf.cast(outputs["start_logits"], tf.float32),
            "end_logits": tf.cast(outputs["end_logits"], tf.float32)}


def serve_spans(module, question, context):
    """Question + context → windows → the model's logits → one answer per question, all in
    the graph. A `BertPreprocessor` export lends its tokenizer (already tracked) and sequence
    length; the windows then use run_squad.py's stride 128 and 64-token questions."""
    from kbert.text.span_decoding import decode_spans
    from kbert.text.span_preprocessor import BertSpanPreprocessor

    pre = module.preprocessor
    if not isinstance(pre, BertSpanPreprocessor):
        pre = BertSpanPreprocessor(pre.tokenizer, pre.sequence_length)
    windows = pre.windows(question, context, require_questions=True)
    features = {k: windows[k] for k in INPUT_KEYS}
    features = trim_to_longest(features) if module.trim_padding else features
    logits = span_outputs(module.model(features, training=False), features, None)
    # Answers are cut from the text the offsets count in: the windowed part, each invalid
    # UTF-8 sequence one U+FFFD (the tokenizer's characters; substr alone would count them
    # differently and shift the answer).
    text = tf.strings.unicode_transcode(pre.cap(context, pre.max_context_length), "UTF-8",
                                        "UTF-8", errors="replace", replacement_char=0xFFFD)
    return decode_spans(logits["start_logits"], logits["end_logits"], windows, text,
                        module.squad_version, null_threshold=module.null_threshold)
