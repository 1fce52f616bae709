"""`write_keras_hub_preset`: convert first, replace only once the new preset is complete
(issue 23: `kbert convert --to keras_hub --overwrite` deleted the destination before a refused
conversion)."""

import dataclasses
import os

import numpy as np
import pytest

from kbert.config import ConfigError
from kbert.convert.keras_hub import from_keras_hub, write_keras_hub_preset
from tests.convert.test_keras_hub import random_backbone


def test_refused_or_failed_conversion_changes_nothing(tmp_path):
    config, weights = from_keras_hub(random_backbone())
    dest = tmp_path / "preset"
    dest.mkdir()
    (dest / "mine.txt").write_text("the user's")
    exact = dataclasses.replace(config, hidden_act="gelu")  # keras-hub cannot compute it
    with pytest.raises(ConfigError, match="allow_approximation"):
        write_keras_hub_preset(dest, exact, weights, overwrite=True)
    with pytest.raises(FileExistsError):  # unrelated files need overwrite
        write_keras_hub_preset(dest, config, weights)
    assert os.listdir(tmp_path) == ["preset"] and os.listdir(dest) == ["mine.txt"]

    write_keras_hub_preset(dest, config, weights, overwrite=True)
    assert "mine.txt" not in os.listdir(dest)
    read_config, read = from_keras_hub(dest)
    assert read_config == config
    for name, value in weights.items():
        np.testing.assert_array_equal(read[name], value, err_msg=name)

    # a previous preset is replaced without overwrite; approximations only when allowed
    with pytest.warns(UserWarning, match="cannot compute this model exactly"):
        write_keras_hub_preset(dest, exact, weights, allow_approximation=True)
    assert os.listdir(tmp_path) == ["preset"]
    assert from_keras_hub(dest)[0].hidden_act == "gelu_tanh"


@pytest.mark.slow
def test_keras_hub_loads_a_converted_preset_whole(minilm_dir, tmp_path):
    """Issue 23: a preset from `kbert convert --to keras_hub` held no tokenizer, so keras-hub's
    `BertTextClassifier.from_preset` failed. Now keras-hub builds the task from it alone: its
    tokenizer gives kbert's ids, its backbone kbert's features (to keras-hub's tanh-GELU)."""
    import keras_hub

    import kbert
    import kbert_cli as cli

    dest = tmp_path / "minilm_hub"
    assert cli.main(["convert", "minilm_l6_h384_uncased", str(dest), "--to", "keras_hub",
                     "--allow-approximation"]) == 0
    texts = ["Angela Merkel visited Paris.", "a joy to watch, funny and warm"]
    hub_tokenizer = keras_hub.models.BertTokenizer.from_preset(str(dest))
    ours = kbert.BertTokenizer.from_pretrained(str(minilm_dir))
    hub_ids = hub_tokenizer(texts)
    hub_ids = hub_ids.to_list() if hasattr(hub_ids, "to_list") else hub_ids
    assert [[int(i) for i in row] for row in hub_ids] == ours(texts).to_list()
    assert kbert.BertTokenizer.from_pretrained(str(dest)).get_vocabulary() == \
        ours.get_vocabulary()  # and kbert reads the preset's vocabulary and casing back

    classifier = keras_hub.models.BertTextClassifier.from_preset(str(dest), num_classes=2)
    probabilities = classifier.predict(texts, verbose=0)
    assert probabilities.shape == (2, 2) and np.isfinite(probabilities).all()
    packed = classifier.preprocessor(texts)
    hub_features = classifier.backbone(packed)["sequence_output"]
    kbert_features = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")(
        {k: packed[k] for k in ("token_ids", "segment_ids", "padding_mask")})["sequence_output"]
    mask = np.asarray(packed["padding_mask"]).astype(bool)
    difference = np.abs(np.asarray(hub_features) - np.asarray(kbert_features))[mask]
    assert difference.max() < 0.05  # tanh-GELU against erf-GELU, through 6 layers
