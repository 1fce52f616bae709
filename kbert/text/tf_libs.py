"""TensorFlow and tensorflow-text, imported once for the text pipeline.

The task models declare their preprocessor classes, and the models run on Keras' JAX backend
where TensorFlow is not installed. So the text modules take `tf` and `tf_text` from here, and
each is None where its library is missing, as in keras-hub's `keras_hub/src/utils/tensor_utils.py`.
Building a tokenizer then fails with `require_tensorflow`'s one line.
"""

try:
    import tensorflow as tf
except ModuleNotFoundError:
    tf = None
try:
    import tensorflow_text as tf_text
except ModuleNotFoundError:
    tf_text = None


def require_tensorflow(user):
    """Raises ModuleNotFoundError naming `user` if TensorFlow or tensorflow-text is missing.

    Args:
        user: what needs them, for the message (a class or function name).

    Examples:
        >>> require_tensorflow("BertTokenizer")
    """
    missing = [name for name, module in (("tensorflow", tf), ("tensorflow-text", tf_text))
               if module is None]
    if missing:
        raise ModuleNotFoundError(
            f"{user} needs {' and '.join(missing)}: pip install {' '.join(missing)}")
