import keras
import numpy as np

from kbert.layers import MaskedLMHead


def _head():
    embedding = keras.layers.Embedding(30, 8)
    embedding.build((None,))
    head = MaskedLMHead(embedding, activation="gelu")
    head.build((None, None, 8))
    head.output_bias.assign(np.random.default_rng(0).normal(size=30))
    return embedding, head


def test_decoder_is_the_embedding_matrix():
    embedding, head = _head()
    assert all(w is not embedding.embeddings for w in head._trainable_variables)
    seq = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    positions = np.array([[1, 3], [0, 4]], "int32")
    before = np.asarray(head(seq, positions))
    embedding.embeddings.assign(embedding.embeddings.numpy() * 2.0)
    assert not np.allclose(before, np.asarray(head(seq, positions)))


def test_logits_at_the_masked_positions_only():
    embedding, head = _head()
    rng = np.random.default_rng(2)
    seq = rng.normal(size=(2, 5, 8)).astype("float32")
    positions = np.array([[1, 3, 3], [0, 4, 2]], "int32")
    got = np.asarray(head(seq, positions))
    assert got.shape == (2, 3, 30)
    gathered = np.stack([seq[b, positions[b]] for b in range(2)])
    h = gathered @ head.transform_dense.kernel.numpy() + head.transform_dense.bias.numpy()
    h = np.asarray(keras.activations.gelu(h, approximate=False))
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-12)
    want = h @ embedding.embeddings.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_config_round_trip():
    _, head = _head()
    clone = MaskedLMHead.from_config(head.get_config())
    assert clone.get_config() == head.get_config()
