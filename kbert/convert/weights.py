"""kbert's canonical weight format, the one place where all checkpoint converters meet.

A checkpoint in canonical form is a dict {name: float32 numpy array} whose names are those of
a Hugging Face `BertModel` / `BertForPreTraining` state dict without the "bert." prefix, in
PyTorch layout (a Linear weight is [out, in]). The pre-training heads are optional and come in
two independent groups: the masked-LM head ("cls.predictions.*"; its decoder matrix is tied to
the word embeddings and is not stored) and the next-sentence head ("cls.seq_relationship.*").

`expected_shapes` lists the names and shapes for a `BertConfig`; `check_weights` compares a
dict against them and raises `CheckpointError` listing every problem at once.
"""

from collections.abc import Mapping

from kbert.config import BertConfig


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or does not fit the model it claims to hold."""


MLM_HEAD = "cls.predictions."
NSP_HEAD = "cls.seq_relationship."
HEAD_GROUPS = (MLM_HEAD, NSP_HEAD)


def expected_shapes(config: BertConfig, heads: bool = False) -> dict[str, tuple[int, ...]]:
    """Names and shapes of every canonical weight of `config`; with `heads`, also both
    pre-training heads."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    shapes = {
        "embeddings.word_embeddings.weight": (v, h),
        "embeddings.position_embeddings.weight": (config.max_position_embeddings, h),
        "embeddings.token_type_embeddings.weight": (config.type_vocab_size, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for n in range(config.num_layers):
        p = f"encoder.layer.{n}."
        for proj in ("query", "key", "value"):
            shapes[f"{p}attention.self.{proj}.weight"] = (h, h)
            shapes[f"{p}attention.self.{proj}.bias"] = (h,)
        shapes.update({
            f"{p}attention.output.dense.weight": (h, h),
            f"{p}attention.output.dense.bias": (h,),
            f"{p}attention.output.LayerNorm.weight": (h,),
            f"{p}attention.output.LayerNorm.bias": (h,),
            f"{p}intermediate.dense.weight": (i, h),
            f"{p}intermediate.dense.bias": (i,),
            f"{p}output.dense.weight": (h, i),
            f"{p}output.dense.bias": (h,),
            f"{p}output.LayerNorm.weight": (h,),
            f"{p}output.LayerNorm.bias": (h,),
        })
    shapes["pooler.dense.weight"] = (h, h)
    shapes["pooler.dense.bias"] = (h,)
    if heads:
        shapes.update({
            "cls.predictions.transform.dense.weight": (h, h),
            "cls.predictions.transform.dense.bias": (h,),
            "cls.predictions.transform.LayerNorm.weight": (h,),
            "cls.predictions.transform.LayerNorm.bias": (h,),
            "cls.predictions.bias": (v,),
            "cls.seq_relationship.weight": (2, h),
            "cls.seq_relationship.bias": (2,),
        })
    return shapes


def check_weights(weights: Mapping, config: BertConfig, *, heads: bool | None = None,
                  source: str = "weights") -> None:
    """Raises `CheckpointError` unless `weights` holds exactly the canonical weights of `config`.

    `heads`: True requires both pre-training heads, False forbids them, None (default) accepts
    each head group (masked LM, next sentence) either complete or absent. Values only need a
    `.shape`. `source` names the checkpoint in the message.
    """
    expected = expected_shapes(config, heads=heads is not False)
    optional = HEAD_GROUPS if heads is None else ()
    found = {name: tuple(value.shape) for name, value in weights.items()}
    check_shapes(found, expected, optional_groups=optional, source=source,
                 what=_describe(config))


def check_shapes(found: Mapping[str, tuple], expected: Mapping[str, tuple], *,
                 optional_groups=(), source: str = "weights", what: str = "the model") -> None:
    """The name-agnostic core of `check_weights`: compares {name: shape} maps.

    Each entry of `optional_groups` is a name prefix; the expected names under it may be all
    absent (then none is reported missing), but a partial group is reported.
    """
    expected = dict(expected)
    for prefix in optional_groups:
        group = [n for n in expected if n.startswith(prefix)]
        if not any(n in found for n in group):
            for n in group:
                del expected[n]
    missing = [n for n in expected if n not in found]
    unexpected = sorted(n for n in found if n not in expected)
    misshaped = [(n, expected[n], tuple(found[n])) for n in expected
                 if n in found and tuple(found[n]) != tuple(expected[n])]
    if not (missing or unexpected or misshaped):
        return
    lines = [f"{source} does not hold the weights of {what}:"]
    if missing:
        lines.append(f"  missing ({len(missing)}): " + ", ".join(_clip(missing)))
    if unexpected:
        lines.append(f"  unexpected ({len(unexpected)}): " + ", ".join(_clip(unexpected)))
    if misshaped:
        lines.append(f"  mis-shaped ({len(misshaped)}): " + ", ".join(
            _clip([f"{n} (expected {list(e)}, got {list(g)})" for n, e, g in misshaped])))
    raise CheckpointError("\n".join(lines))


def check_finite(value, name, source):
    """`value` itself, unless it holds NaN or infinity: then `CheckpointError` naming the
    tensor and how many of its values are not finite (a diverged run saved, a corrupt file)."""
    import numpy as np

    finite = np.isfinite(value)
    if not finite.all():
        bad = int(finite.size - np.count_nonzero(finite))
        raise CheckpointError(f"{source}: tensor {name!r} holds {bad:,} NaN or infinite "
                              f"value(s) of {finite.size:,}.")
    return value


def _describe(config: BertConfig) -> str:
    return (f"a BERT with {config.num_layers} layers, hidden size {config.hidden_size}, "
            f"intermediate size {config.intermediate_size}, vocabulary "
            f"{config.vocab_size}, {config.max_position_embeddings} positions and "
            f"{config.type_vocab_size} segment types")


def _clip(items, limit=20):
    items = list(items)
    if len(items) <= limit:
        return items
    return items[:limit] + [f"... and {len(items) - limit} more"]
