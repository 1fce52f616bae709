"""`BertTask`: what every model built on a `BertBackbone` shares, its serialisation."""

import keras


class BertTask(keras.Model):
    """Base of the task models. A subclass lists its own constructor arguments in
    `task_config()`; `get_config` adds the serialised backbone, and `from_config` rebuilds the
    backbone first, so ties into it (the MLM decoder, frozen features) are made anew by the
    subclass constructor."""

    def task_config(self) -> dict:
        return {}

    def get_config(self):
        return {
            "backbone": keras.layers.serialize(self.backbone),
            **self.task_config(),
            "name": self.name,
            "trainable": self.trainable,
        }

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved. Keras skips this (with a warning) for any
        model whose `compile` is overridden; ours only fill in task defaults, and the saved
        arguments are the filled-in ones, so they pass through unchanged. The optimizer is
        built here so that loading restores its moments and step count."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)
