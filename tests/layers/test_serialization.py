"""kbert layers survive a .keras file round trip (safe mode) with identical outputs.

The MLM head shares the backbone's embedding layer, a tie that only a model can restore; its
round trip is tested through `BertPretrainer` (tests/models/test_pretrainer.py).
"""

import keras
import numpy as np

from kbert.layers import BertEmbeddings, TransformerEncoderBlock, attention_bias


def test_layers_round_trip_through_a_keras_file(tmp_path):
    ids = keras.Input((None,), dtype="int32", name="ids")
    mask = keras.Input((None,), dtype="int32", name="mask")
    embeddings = BertEmbeddings(vocab_size=40, hidden_size=16, max_position_embeddings=12)
    x = embeddings(ids, ids * 0)
    x, probs = TransformerEncoderBlock(num_heads=2, intermediate_size=32, activation="gelu_tanh")(
        x, attention_bias=attention_bias(mask, causal=True), return_attention=True)
    model = keras.Model([ids, mask], {"x": x, "probs": probs})

    rng = np.random.default_rng(0)
    for variable in model.weights:
        variable.assign(rng.normal(scale=0.3, size=variable.shape))
    data = [rng.integers(0, 40, (2, 6)).astype("int32"), np.array([[1] * 6, [1] * 3 + [0] * 3])]
    model.save(tmp_path / "layers.keras")
    loaded = keras.saving.load_model(tmp_path / "layers.keras", safe_mode=True)
    a, b = model.predict(data, verbose=0), loaded.predict(data, verbose=0)
    for key in ("x", "probs"):
        np.testing.assert_array_equal(a[key], b[key])
