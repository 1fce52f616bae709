"""What each task's serving signatures return (see `kbert.export.signatures` for the table
and the output names): `*_outputs(outputs, features, label_names)` turn the model's outputs
into the signature's tensors; `serve_entities` and `serve_spans` replace the whole text path
for the tasks whose answers are read off the text itself."""

import tensorflow as tf

from kbert.models.backbone import INPUT_KEYS
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
    """Raw text → words → the model's logits → entities, all in the graph. The export's
    `BertPreprocessor` lends its tokenizer (already tracked) and sequence length."""
    from kbert.text.entity_decoding import decode_entities
    from kbert.text.token_preprocessor import BertTokenPreprocessor

    pre = module.preprocessor
    if not isinstance(pre, BertTokenPreprocessor):
        pre = BertTokenPreprocessor(pre.tokenizer, pre.sequence_length)
    words, starts, ends, text = pre.split_text(text)
    features = pre(words)
    features = {k: features[k] for k in INPUT_KEYS + ("word_index",)}
    features = trim_to_longest(features) if module.trim_padding else features
    logits = module.model({k: features[k] for k in INPUT_KEYS}, training=False)
    return decode_entities(tf.cast(logits, tf.float32), features["word_index"], starts, ends,
                           text, module.label_names)


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
    windows = pre(question, context)
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
