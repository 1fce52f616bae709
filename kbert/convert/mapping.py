"""Moves weights between kbert's layers and the canonical format of `kbert.convert.weights`.

Each kbert variable is one "slot" holding one or more canonical arrays: a Dense kernel is the
transposed PyTorch weight, and the fused query/key/value kernel is the three projections side
by side (query columns first, heads in order), which is the layout the encoder block reshapes.
"""

import numpy as np

from kbert.convert.weights import MLM_HEAD, NSP_HEAD, check_weights


def _one(arrays):
    return arrays[0]


def _transposed(arrays):
    return arrays[0].T


def _fused_kernel(arrays):
    return np.concatenate([a.T for a in arrays], axis=1)


def _fused_bias(arrays):
    return np.concatenate(arrays)


# How to build a kbert value from canonical arrays, and the inverse.
_PACK = {"one": _one, "linear": _transposed, "qkv_kernel": _fused_kernel, "qkv_bias": _fused_bias}
_UNPACK = {
    "one": lambda v: [v],
    "linear": lambda v: [v.T],
    "qkv_kernel": lambda v: [part.T for part in np.split(v, 3, axis=1)],
    "qkv_bias": lambda v: np.split(v, 3),
}


def _dense(layer, name):
    return [(layer.kernel, [f"{name}.weight"], "linear"), (layer.bias, [f"{name}.bias"], "one")]


def _layer_norm(layer, name):
    return [(layer.gamma, [f"{name}.weight"], "one"), (layer.beta, [f"{name}.bias"], "one")]


def backbone_slots(backbone):
    """(variable, canonical names, codec) for every weight of a `BertBackbone`."""
    emb = backbone.embeddings
    slots = [
        (emb.token_embedding.embeddings, ["embeddings.word_embeddings.weight"], "one"),
        (emb.position_embedding.embeddings, ["embeddings.position_embeddings.weight"], "one"),
        (emb.segment_embedding.embeddings, ["embeddings.token_type_embeddings.weight"], "one"),
        *_layer_norm(emb.layer_norm, "embeddings.LayerNorm"),
    ]
    for i, block in enumerate(backbone.encoder_blocks):
        p = f"encoder.layer.{i}."
        qkv = [f"{p}attention.self.{proj}" for proj in ("query", "key", "value")]
        slots += [
            (block.qkv_dense.kernel, [f"{n}.weight" for n in qkv], "qkv_kernel"),
            (block.qkv_dense.bias, [f"{n}.bias" for n in qkv], "qkv_bias"),
            *_dense(block.attention_output_dense, f"{p}attention.output.dense"),
            *_layer_norm(block.attention_layer_norm, f"{p}attention.output.LayerNorm"),
            *_dense(block.intermediate_dense, f"{p}intermediate.dense"),
            *_dense(block.output_dense, f"{p}output.dense"),
            *_layer_norm(block.output_layer_norm, f"{p}output.LayerNorm"),
        ]
    return slots + _dense(backbone.pooler, "pooler.dense")


def head_slots(mlm_head=None, nsp_head=None):
    """Slots of the pre-training heads that exist (the MLM decoder is the tied embedding)."""
    slots = []
    if mlm_head is not None:
        slots += [
            *_dense(mlm_head.transform_dense, "cls.predictions.transform.dense"),
            *_layer_norm(mlm_head.layer_norm, "cls.predictions.transform.LayerNorm"),
            (mlm_head.output_bias, ["cls.predictions.bias"], "one"),
        ]
    if nsp_head is not None:
        slots += _dense(nsp_head, "cls.seq_relationship")
    return slots


def read_slots(slots) -> dict:
    """The canonical dict of the given slots' current values."""
    weights = {}
    for variable, names, codec in slots:
        arrays = _UNPACK[codec](np.asarray(variable.numpy(), dtype="float32"))
        weights.update(zip(names, (np.ascontiguousarray(a) for a in arrays)))
    return weights


def assign_slots(slots, weights) -> None:
    for variable, names, codec in slots:
        variable.assign(_PACK[codec]([weights[n] for n in names]).astype(variable.dtype))


def set_head_weights(pretrainer, weights) -> list[str]:
    """Loads the pre-training heads that both `pretrainer` (a `BertPretrainer`) and the
    canonical dict `weights` hold (readers check that a head group is complete or absent);
    returns the groups loaded, as `HEAD_GROUPS` prefixes. Any other head keeps its weights."""
    groups = {MLM_HEAD: head_slots(mlm_head=pretrainer.mlm_head),
              NSP_HEAD: head_slots(nsp_head=pretrainer.nsp_head)}
    loaded = [prefix for prefix, slots in groups.items()
              if slots and any(name.startswith(prefix) for name in weights)]
    for prefix in loaded:
        assign_slots(groups[prefix], weights)
    return loaded


def get_backbone_weights(backbone) -> dict:
    """Reads a backbone's weights as a canonical dict, the form every checkpoint format
    converts through.

    Args:
      backbone: a `kbert.BertBackbone`.

    Returns:
      {canonical name: numpy array}, with Hugging Face `BertModel`'s names
      ("embeddings.word_embeddings.weight", ...).

    Examples:
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> weights = kbert.convert.get_backbone_weights(backbone)
        >>> weights["encoder.layer.0.attention.self.query.weight"].shape
        (128, 128)
    """
    return read_slots(backbone_slots(backbone))


def set_backbone_weights(backbone, weights, source="weights") -> None:
    """Loads a canonical dict of weights into a backbone.

    Args:
      backbone: a `kbert.BertBackbone`.
      weights: canonical weights (`read_checkpoint`, `get_backbone_weights`); head weights
        ("cls.*") are ignored here.
      source: what the weights came from, named in the error for weights that do not fit.

    Raises:
      CheckpointError: missing, unexpected or mis-shaped weights.

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> config = kbert.BertConfig.preset("tiny")
        >>> first, second = kbert.BertBackbone(config), kbert.BertBackbone(config)
        >>> kbert.convert.set_backbone_weights(second, kbert.convert.get_backbone_weights(first))
        >>> all(np.array_equal(a, b) for a, b in zip(first.get_weights(), second.get_weights()))
        True
    """
    body = {n: w for n, w in weights.items() if not n.startswith("cls.")}
    check_weights(body, backbone.config, heads=False, source=source)
    assign_slots(backbone_slots(backbone), body)
