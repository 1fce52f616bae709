"""Which layers of a kbert model are frozen, kept through `save` and `load_model`.

Keras rebuilds a kbert model from its constructor arguments, not from its layers' configs, so a
layer frozen by hand (`backbone.get_layer("embeddings").trainable = False`, the lower blocks of
a gradual fine-tuning recipe) came back trainable. `frozen_layers` names them for `get_config`
and `apply_trainable` freezes them again in the constructor.
"""

import keras


def frozen_layers(model):
    """Names of the layers with weights frozen inside a trainable `model`: "layer" for one of
    its own layers, "layer/part" for a part of one (e.g. "embeddings/token_embedding"). Nested
    models keep their own (a task model's backbone); a frozen `model` needs none."""
    if not model.trainable:
        return []
    names = []
    for layer in model.layers:
        if isinstance(layer, keras.Model) or not layer.weights:
            continue
        if not layer.trainable:
            names.append(layer.name)
            continue
        names += [f"{layer.name}/{part.name}" for part in _parts(layer)
                  if part.weights and not part.trainable]
    return names


def apply_trainable(model, frozen=()):
    """Freezes every layer of `model` when it was built with `trainable=False`, else the layers
    named in `frozen` (`frozen_layers`' names); an unknown name is a ValueError."""
    if not model.trainable:
        # Keras' functional constructor runs the `trainable` setter before it tracks the
        # layers, so the flag reached none of them. Not `model.trainable = False`: Keras'
        # TensorFlow tracking skips assigning an attribute the value it already holds.
        keras.layers.Layer.trainable.fset(model, False)
        return
    layers = {layer.name: layer for layer in model.layers}
    for name in frozen:
        top, _, part = str(name).partition("/")
        found = layers.get(top)
        if found is not None and part:
            found = {p.name: p for p in _parts(found)}.get(part)
        if found is None:
            raise ValueError(f"frozen_layers names {name!r}, which {type(model).__name__} "
                             f"does not have; its layers: {', '.join(layers)}.")
        found.trainable = False


def _parts(layer):
    """The layers inside `layer`, at any depth."""
    return layer._flatten_layers(include_self=False)
