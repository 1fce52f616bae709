"""The activations a BertConfig can name, as plain functions of keras.ops."""

import math

import keras
from keras import ops


def gelu(x):
    """Exact GELU, x·Φ(x) with the Gaussian CDF through erf (Hugging Face's "gelu").

    Written with `erf` rather than Keras' `gelu`: on TensorFlow that one goes through `erfc`,
    which XLA expands into two polynomial branches and a select, twice the cost of one erf.
    In float32 the erf form is within 1.1e-6 of the float64 GELU on [-12, 12] (erfc's: 4e-7);
    the difference is absolute, in the far negative tail, where 1 + erf(x) cancels.
    """
    return 0.5 * x * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0))))


def gelu_tanh(x):
    """The tanh approximation of GELU that Google's original BERT code uses."""
    return keras.activations.gelu(x, approximate=True)


def get(name: str):
    functions = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": keras.activations.relu}
    if name not in functions:
        raise ValueError(f"Unknown activation {name!r}; choose one of {sorted(functions)}.")
    return functions[name]
