"""The activations a BertConfig can name, as plain functions of keras.ops."""

import keras


def gelu(x):
    """Exact GELU, x·Φ(x) with the Gaussian CDF through erf (Hugging Face's "gelu")."""
    return keras.activations.gelu(x, approximate=False)


def gelu_tanh(x):
    """The tanh approximation of GELU that Google's original BERT code uses."""
    return keras.activations.gelu(x, approximate=True)


def get(name: str):
    functions = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": keras.activations.relu}
    if name not in functions:
        raise ValueError(f"Unknown activation {name!r}; choose one of {sorted(functions)}.")
    return functions[name]
