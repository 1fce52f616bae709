"""`kbert.text.datasets.as_tensor_data`: the raw text a user passes to `fit` / `predict` is
read, never changed."""

import numpy as np
import pandas as pd
import pytest

from kbert.text.datasets import as_tensor_data


def test_the_callers_array_is_left_as_it_was():
    texts = np.array(["caf\ud800e", "plain"], dtype=object)
    tensor_data = as_tensor_data(texts)
    assert texts[0] == "caf\ud800e"  # the lone surrogate is replaced in kbert's copy only
    assert tensor_data[0] == "caf\ufffde" and tensor_data[1] == "plain"


def test_a_read_only_pandas_column_is_text():
    column = pd.Series(["A joy to watch.", "Caf\u00e9 scenes."])
    assert not np.asarray(column).flags.writeable  # pandas' copy-on-write view
    assert list(as_tensor_data(column)) == ["A joy to watch.", "Caf\u00e9 scenes."]


def test_a_missing_value_is_named():
    with pytest.raises((TypeError, ValueError), match="None|missing|text"):
        as_tensor_data(pd.Series(["fine", None]))
