"""`export_hub_models`: a backbone as the preprocessor and encoder SavedModels of TF Hub's BERT
models, so code written for those (the TF2 BERT models on TF Hub and Kaggle Models, the Model
Garden's `export_tfhub`) runs on a kbert model unchanged: `hub.KerasLayer(...)` in TensorFlow's
"Classify text with BERT" tutorial, `preprocessor.bert_pack_inputs` in its GLUE one.

    EXPORT_DIR/preprocessor/  preprocessor(text) -> encoder inputs [batch, sequence_length];
                              .tokenize(text) -> int32 RaggedTensor [batch, (words),
                              (tokens)];
                              .bert_pack_inputs([tokens_a(, tokens_b)], seq_length=...)
    EXPORT_DIR/encoder/       encoder(inputs, training=False) -> sequence_output,
                              pooled_output, default (= pooled_output), encoder_outputs (every
                              block's output); .variables, .trainable_variables,
                              .regularization_losses

The API is TF Hub's "text embeddings with Transformer encoders"
(tensorflow.org/hub/common_saved_model_apis/text). Encoder inputs carry the Model Garden's
names: `input_word_ids`, `input_type_ids`, `input_mask` (kbert's `token_ids`, `segment_ids`,
`padding_mask`). Packing and truncation are `BertPreprocessor.pack_tokens` (Google's rule), so a
packed pair is what kbert's own pipeline gives; text typed as "[SEP]" stays text.
"""

import os
import pathlib
import shutil
import tempfile

import tensorflow as tf

from kbert.atomic import atomic_directory
from kbert.export.saved_model import vocabulary_asset
from kbert.export.signatures import unique_variables
from kbert.models.input_limits import check_preprocessor, model_limits

# The Model Garden's encoder input names -> kbert's.
HUB_INPUTS = {"input_word_ids": "token_ids", "input_type_ids": "segment_ids",
              "input_mask": "padding_mask"}
PARTS = ("preprocessor", "encoder")


def export_hub_models(backbone, preprocessor, export_dir, overwrite=False):
    """Writes `export_dir/preprocessor/` and `export_dir/encoder/` (see the module docstring),
    both at once or neither; returns `export_dir`.

    Args:
      backbone: a `BertBackbone` (a task model's `.backbone` for a fine-tuned encoder).
      preprocessor: the `BertPreprocessor` it reads text with; its `sequence_length` is the
        preprocessor's default `seq_length`.
      overwrite: replace an `export_dir` that holds other files than an earlier export's.
    """
    if backbone.causal:
        raise ValueError("TF Hub's BERT encoders are bidirectional; a causal backbone (the "
                         "left-to-right ablation) has no such export.")
    check_preprocessor(model_limits(backbone), preprocessor)  # no rows it cannot embed
    target = pathlib.Path(os.path.abspath(os.fspath(export_dir)))
    scratch = pathlib.Path(tempfile.mkdtemp(prefix=".kbert-hub-"))
    try:
        with atomic_directory(target, owned_files=PARTS, overwrite=overwrite) as staging:
            tf.saved_model.save(_preprocessor_object(preprocessor, scratch),
                                str(staging / "preprocessor"))
            tf.saved_model.save(_encoder_object(backbone), str(staging / "encoder"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _preprocessor_object(preprocessor, scratch):
    """The preprocessor SavedModel's root: `__call__`, `tokenize`, `bert_pack_inputs`."""
    tokenizer = preprocessor.tokenizer
    root = tf.train.Checkpoint()
    root.preprocessor = preprocessor  # its lookup tables must be tracked; it has no variables
    root.vocabulary_file = vocabulary_asset(preprocessor, scratch)
    default_length = preprocessor.sequence_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(text):
        return tokenizer.tokenize_words(text)

    @tf.function
    def bert_pack_inputs(inputs, seq_length=default_length):
        segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in inputs]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"bert_pack_inputs packs one or two segments, got {len(segments)}.")
        seq_length = tf.convert_to_tensor(seq_length, tf.int32)
        check = tf.debugging.assert_greater_equal(
            seq_length, len(segments) + 1,
            message="seq_length has no room for [CLS] and each segment's [SEP]")
        with tf.control_dependencies([check]):
            seq_length = tf.identity(seq_length)
        return _hub_inputs(preprocessor.pack_tokens([(tf.cast(s, tf.int32),) for s in segments],
                                                    seq_length))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def preprocess(text):
        return _hub_inputs(preprocessor(text))

    for ragged_rank in (1, 2):  # tokens, or words of tokens (tensorflow_text's BertTokenizer)
        spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
        for segments in (1, 2):
            bert_pack_inputs.get_concrete_function([spec] * segments)
            bert_pack_inputs.get_concrete_function(
                [spec] * segments, seq_length=tf.TensorSpec([], tf.int32))
    root.__call__ = preprocess
    root.tokenize = tokenize
    root.bert_pack_inputs = bert_pack_inputs
    return root


def _hub_inputs(packed):
    return {hub: packed[name] for hub, name in HUB_INPUTS.items()}


def _encoder_object(backbone):
    """The encoder SavedModel's root: `__call__(inputs, training=False)` and the variable
    lists TF Hub's Reusable SavedModel API asks for (what `hub.KerasLayer(trainable=True)`
    fine-tunes)."""
    from kbert.models import BertBackbone

    # The same weights, with every block's output (the `encoder_outputs` list).
    encoder = BertBackbone.from_config({**backbone.get_config(), "output_hidden_states": True})
    encoder.set_weights(backbone.get_weights())

    @tf.function
    def encode(inputs, training=False):
        outputs = encoder({name: inputs[hub] for hub, name in HUB_INPUTS.items()},
                          training=training)
        pooled = outputs["pooled_output"]
        return {"sequence_output": outputs["sequence_output"], "pooled_output": pooled,
                "default": pooled, "encoder_outputs": list(outputs["hidden_states"][1:])}

    spec = {hub: tf.TensorSpec([None, None], tf.int32, name=hub) for hub in HUB_INPUTS}
    traced = [encode.get_concrete_function(spec, training=mode) for mode in (False, True)]
    root = tf.train.Checkpoint()
    root.__call__ = encode
    # Only the tf.Variables the graphs read are saved (as `kbert.export.signatures` does),
    # not the Keras model, which would save each variable twice.
    root.variables = unique_variables(v for fn in traced for v in fn.variables)
    root.trainable_variables = unique_variables(v for fn in traced
                                                for v in fn.trainable_variables)
    root.regularization_losses = []
    return root
