"""Which ops a stock TensorFlow Serving model server can run, and a check of an export against it.

Stock `tensorflow_model_server` links all of TensorFlow core's ops and kernels plus one extra
library of custom ops: tensorflow-text's `ops_lib`. Sources (read on tensorflow/serving and
tensorflow/text at GitHub):
  * tensorflow/serving, `tensorflow_serving/model_servers/BUILD`: `SUPPORTED_TENSORFLOW_OPS`
    lists `@org_tensorflow_text//tensorflow_text:ops_lib` (and TF Decision Forests' inference
    op, irrelevant here); `server_lib` depends on it and on `@org_tensorflow//tensorflow/core:
    tensorflow` (all core ops).
  * tensorflow/text, `tensorflow_text/BUILD`: `ops_lib` = boise_offset_converter,
    byte_splitter, constrained_sequence_op, fast_bert_normalizer, fast_sentencepiece_tokenizer,
    fast_wordpiece_tokenizer, mst_ops, ngrams_op, normalize_ops, phrase_tokenizer,
    regex_split_ops, sentence_breaking_ops, sentencepiece_mobile_tokenizer,
    sentencepiece_tokenizer, split_merge_from_logits_tokenizer, split_merge_tokenizer,
    state_based_sentence_breaker_op, text_similarity_metric_ops, trimmer_ops,
    unicode_script_tokenizer, utf8_binarize_op, whitespace_tokenizer, whitespace_tokenizer_v2,
    wordpiece_tokenizer.
The op names of those libraries below were read from the `OP_LIST` of each op library in the
tensorflow-text 2.21.1 wheel (`tensorflow_text/python/ops/_*.so`). The wheel does not ship
sentencepiece_mobile_tokenizer or text_similarity_metric_ops as Python op libraries; kbert needs
neither, so their ops are left out (a stricter list is the safe side).

An export must use only TensorFlow core ops (judged by `tf.raw_ops`, which lists the ops of the
TensorFlow build itself and none of tensorflow-text's) and the tensorflow-text ops below, and
never a Python callback (`PyFunc`/`EagerPyFunc` are core ops, but a model server has no
Python to call back into).
"""

import pathlib

# The tensorflow-text ops compiled into stock TensorFlow Serving (`ops_lib`), by op library.
TF_TEXT_SERVING_OPS_BY_LIBRARY = {
    "boise_offset_converter": ("TFText_BoiseTagsToOffsets", "TFText_OffsetsToBoiseTags"),
    "byte_splitter": ("TFText_ByteSplitByOffsets", "TFText_ByteSplitWithOffsets"),
    "constrained_sequence_op": ("ConstrainedSequence",),
    "fast_bert_normalizer": ("FastBertNormalize",),
    "fast_sentencepiece_tokenizer": ("TFText_FastSentencepieceDetokenize",
                                     "TFText_FastSentencepieceTokenize"),
    "fast_wordpiece_tokenizer": ("FastWordpieceTokenizeWithOffsets",
                                 "TFText_FastWordpieceDetokenize"),
    "mst_ops": ("MaxSpanningTree",),
    "ngrams_op": ("TFText_NgramsStringJoin",),
    "normalize_ops": ("CaseFoldUTF8", "FindSourceOffsets", "NormalizeUTF8",
                      "NormalizeUTF8WithOffsetsMap"),
    "phrase_tokenizer": ("PhraseTokenize", "TFText_PhraseDetokenize"),
    "regex_split_ops": ("RegexSplitWithOffsets",),
    "sentence_breaking_ops": ("SentenceFragments",),
    "sentencepiece_tokenizer": ("SentencepieceOp", "SentencepieceTokenizeOp",
                                "SentencepieceTokenizeWithOffsetsOp",
                                "SentencepieceDetokenizeOp", "SentencepieceVocabSizeOp",
                                "SentencepieceIdToStringOp", "SentencepieceStringToIdOp"),
    "split_merge_from_logits_tokenizer": ("TokenizerFromLogits",),
    "split_merge_tokenizer": ("SplitMergeTokenizeWithOffsets",),
    "state_based_sentence_breaker_op": ("SentenceFragmentsV2",),
    "trimmer_ops": ("TFText_RoundRobinGenerateMasks", "TFText_RoundRobinTrim"),
    "unicode_script_tokenizer": ("UnicodeScriptTokenizeWithOffsets",),
    "utf8_binarize_op": ("TFText_Utf8Binarize",),
    "whitespace_tokenizer": ("WhitespaceTokenizeWithOffsets",),
    "whitespace_tokenizer_v2": ("TFText_WhitespaceTokenizeWithOffsetsV2",),
    "wordpiece_tokenizer": ("WordpieceTokenizeWithOffsets",),
}
TF_TEXT_SERVING_OPS = frozenset(
    op for ops in TF_TEXT_SERVING_OPS_BY_LIBRARY.values() for op in ops)

# Core ops that a model server cannot run: they call back into the exporting Python process.
FORBIDDEN_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def graph_ops(saved_model_dir):
    """{op type: sorted names of the graphs using it} over every graph in a SavedModel: each
    MetaGraph's top-level graph_def and every function of its function library. Calls of
    library functions (a node whose op is a function name) are not ops and are skipped."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = pathlib.Path(saved_model_dir) / "saved_model.pb"
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(path.read_bytes())
    used = {}
    for meta_graph in proto.meta_graphs:
        graph = meta_graph.graph_def
        functions = {f.signature.name for f in graph.library.function}
        bodies = [("<graph>", graph.node)]
        bodies += [(f.signature.name, f.node_def) for f in graph.library.function]
        for owner, nodes in bodies:
            for node in nodes:
                if node.op not in functions:
                    used.setdefault(node.op, set()).add(owner)
    return {op: sorted(owners) for op, owners in used.items()}


def is_core_op(op_name):
    """Whether `op_name` is an op of TensorFlow itself (not of tensorflow-text or another
    library loaded into this process)."""
    import tensorflow as tf

    return hasattr(tf.raw_ops, op_name)


def unservable_ops(saved_model_dir):
    """{op: graphs} for the ops of an export that stock TensorFlow Serving cannot run (not core
    and not in `TF_TEXT_SERVING_OPS`, or in `FORBIDDEN_OPS`). Empty means servable."""
    return {op: owners for op, owners in graph_ops(saved_model_dir).items()
            if op in FORBIDDEN_OPS or not (op in TF_TEXT_SERVING_OPS or is_core_op(op))}


def check_servable(saved_model_dir):
    """Raises ValueError naming the ops stock TensorFlow Serving lacks, if any."""
    bad = unservable_ops(saved_model_dir)
    if bad:
        listing = "; ".join(f"{op} (in {', '.join(owners[:3])})" for op, owners in
                            sorted(bad.items()))
        raise ValueError(f"The export uses ops that stock TensorFlow Serving cannot run: "
                         f"{listing}.")
