"""`PreprocessorBase`: what every kbert preprocessor layer shares.

A preprocessor holds a `BertTokenizer`, has no weights and outputs integers; its config carries
the tokenizer (vocabulary and casing), so a task model saved with it packs text the same way
after loading.
"""

import keras

from kbert.text.tokenizer import BertTokenizer


class PreprocessorBase(keras.layers.Layer):
    """Base of `BertPreprocessor`, `BertSpanPreprocessor`, `BertTokenPreprocessor` and
    `BertMaskedLMPreprocessor`. Subclasses add their own settings to `get_config`."""

    def __init__(self, tokenizer, **kwargs):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise TypeError(f"{type(self).__name__} needs a BertTokenizer, got "
                            f"{type(tokenizer)}.")
        self.tokenizer = tokenizer

    def get_config(self):
        return {**super().get_config(),
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)
