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

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)
