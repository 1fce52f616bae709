import keras
import numpy as np

from kbert.layers import BertEmbeddings


def _layer():
    layer = BertEmbeddings(vocab_size=50, hidden_size=8, max_position_embeddings=16,
                           layer_norm_eps=1e-12)
    layer(np.zeros((1, 4), "int32"), np.zeros((1, 4), "int32"))
    return layer


def test_sum_of_three_tables_then_layer_norm():
    layer = _layer()
    ids = np.array([[3, 7, 9]], "int32")
    segments = np.array([[0, 1, 1]], "int32")
    tok = layer.token_embedding.embeddings.numpy()
    pos = layer.position_embedding.embeddings.numpy()
    seg = layer.segment_embedding.embeddings.numpy()
    summed = tok[ids[0]] + pos[:3] + seg[segments[0]]
    mean, var = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
    expected = (summed - mean) / np.sqrt(var + 1e-12)  # gamma=1, beta=0 at init
    got = np.asarray(layer(ids, segments, training=False))[0]
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_dropout_only_in_training():
    layer = _layer()
    ids = np.ones((2, 6), "int32")
    a = np.asarray(layer(ids, 0 * ids, training=False))
    np.testing.assert_array_equal(a, np.asarray(layer(ids, 0 * ids, training=False)))
    assert not np.allclose(a, np.asarray(layer(ids, 0 * ids, training=True)))


def test_config_round_trip():
    layer = _layer()
    clone = BertEmbeddings.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    assert keras.ops.shape(clone(np.ones((2, 3), "int32"), np.zeros((2, 3), "int32"))) == (2, 3, 8)
