"""What a backbone can embed, and the check that a preprocessor packs nothing beyond it.

Beyond its limits the embedding lookup fails without XLA and, under XLA (kbert's default for
inputs of one length), reads a clamped row: an answer, but garbage. Task models check their
preprocessor when built, exports theirs (`kbert.export.input_checks` checks requests too).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class InputLimits:
    """What a model's inputs may hold: ids in [0, vocab_size), segments in
    [0, type_vocab_size), at most `max_positions` tokens a row (None: not known)."""

    vocab_size: int = None
    type_vocab_size: int = None
    max_positions: int = None


def model_limits(model):
    """`InputLimits` from the `BertConfig` of `model` (a backbone) or of the backbone it holds;
    all None for another Keras model (exported with `task=`), whose limits are not known."""
    from kbert.config import BertConfig

    seen = set()
    while model is not None and id(model) not in seen:
        seen.add(id(model))
        config = getattr(model, "config", None)
        if isinstance(config, BertConfig):
            return InputLimits(config.vocab_size, config.type_vocab_size,
                               config.max_position_embeddings)
        model = getattr(model, "backbone", None)
    return InputLimits()


def check_preprocessor(limits, preprocessor):
    """Raises ValueError when the preprocessor can make ids the model cannot take: a longer
    `sequence_length` than its positions, or a larger vocabulary than its embedding."""
    length = getattr(preprocessor, "sequence_length", None)
    if limits.max_positions is not None and length is not None \
            and length > limits.max_positions:
        raise ValueError(f"The preprocessor's sequence_length={length} exceeds the model's "
                         f"{limits.max_positions} positions (max_position_embeddings).")
    size = preprocessor.tokenizer.vocabulary_size()
    if limits.vocab_size is not None and size > limits.vocab_size:
        raise ValueError(f"The preprocessor's vocabulary has {size} tokens but the model's "
                         f"embedding only {limits.vocab_size} (vocab_size).")
