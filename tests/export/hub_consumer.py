"""What code written for TF Hub's BERT models does with a `kbert convert --to tf_hub` export,
in a process that does not import kbert: the calls of TF Hub's API page for Transformer encoders
(tensorflow.org/hub/common_saved_model_apis/text), the model of TensorFlow's "Classify text
with BERT" tutorial (site/en/tutorials/text/classify_text_with_bert.ipynb in tensorflow/docs)
with tensorflow_hub and tf_keras, and Keras 3's `keras.layers.TFSMLayer`.

Usage: python hub_consumer.py EXPORT_DIR JOB.json OUT.npz, where JOB.json holds "texts",
"pairs" ([a, b] lists) and "pair_length". tests/export/test_hub_models.py checks OUT.npz.
"""

import json
import sys

import keras
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (registers the ops the preprocessor runs)
import tf_keras


def read_back(export_dir, job):
    """Encoder inputs for single texts and pairs, and the encoder's outputs on the singles."""
    preprocessor = hub.load(f"{export_dir}/preprocessor")
    encoder = hub.load(f"{export_dir}/encoder")
    singles = preprocessor(tf.constant(job["texts"]))
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    pack = hub.KerasLayer(preprocessor.bert_pack_inputs,
                          arguments=dict(seq_length=job["pair_length"]))
    first, second = (tf.constant(list(column)) for column in zip(*job["pairs"]))
    pairs = pack([tokenize(first), tokenize(second)])
    # `tokenize` groups tokens by word ([batch, (words), (tokens)]); packing flattens the
    # groups, and takes tokens already flat ([batch, (tokens)]) too.
    flat = preprocessor.bert_pack_inputs(
        [preprocessor.tokenize(t).merge_dims(-2, -1) for t in (first, second)],
        seq_length=job["pair_length"])
    words = preprocessor.tokenize(tf.constant(job["texts"]))
    outputs = encoder(singles)
    result = {f"single/{k}": v.numpy() for k, v in singles.items()}
    result.update({f"pair/{k}": v.numpy() for k, v in pairs.items()})
    result.update({f"flat/{k}": v.numpy() for k, v in flat.items()})
    result["words"] = np.asarray(json.dumps(words.to_list()))
    result["words_shape"] = np.asarray([words.shape.rank, words.ragged_rank,
                                        words.dtype == tf.int32])
    result.update({k: outputs[k].numpy() for k in ("sequence_output", "pooled_output",
                                                   "default")})
    result["encoder_outputs"] = np.stack([o.numpy() for o in outputs["encoder_outputs"]])
    result["pooled_training"] = encoder(singles, training=True)["pooled_output"].numpy()
    keras_layer = keras.layers.TFSMLayer(f"{export_dir}/encoder", call_endpoint="__call__")
    result["keras3_pooled"] = np.asarray(keras_layer(singles)["pooled_output"])
    result["variables"] = [len(encoder.variables), len(encoder.trainable_variables),
                           len(encoder.regularization_losses)]
    return result


def fine_tune(export_dir, texts):
    """The tutorial's classifier (text -> preprocessor -> trainable encoder -> pooled_output
    -> dropout -> dense), two steps of `fit`: its losses and how far the encoder moved."""
    text_input = tf_keras.layers.Input(shape=(), dtype=tf.string, name="text")
    encoder_inputs = hub.KerasLayer(f"{export_dir}/preprocessor", name="preprocessing")(
        text_input)
    encoder = hub.KerasLayer(f"{export_dir}/encoder", trainable=True, name="BERT_encoder")
    net = encoder(encoder_inputs)["pooled_output"]
    net = tf_keras.layers.Dropout(0.1)(net)
    net = tf_keras.layers.Dense(1, activation=None, name="classifier")(net)
    model = tf_keras.Model(text_input, net)
    model.compile(optimizer=tf_keras.optimizers.Adam(3e-5),
                  loss=tf_keras.losses.BinaryCrossentropy(from_logits=True))
    before = [v.numpy() for v in encoder.trainable_variables]
    labels = np.arange(len(texts)) % 2
    history = model.fit(tf.constant(texts), labels.astype("float32"), batch_size=2, epochs=1,
                        verbose=0)
    moved = [np.abs(v.numpy() - b).max() for v, b in zip(encoder.trainable_variables, before)]
    return {"fit_loss": np.asarray(history.history["loss"]),
            "encoder_trainable": len(encoder.trainable_variables),
            "moved": np.asarray(moved)}


def main(export_dir, job_path, out_path):
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    np.savez(out_path, **read_back(export_dir, job), **fine_tune(export_dir, job["texts"][:4]))


if __name__ == "__main__":
    main(*sys.argv[1:])
