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
