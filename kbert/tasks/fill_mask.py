"""Filling blanks with a pre-trained masked LM, Hugging Face's fill-mask pipeline for kbert:
`fill_mask` on a `BertPretrainer`, `open_masked_lm` for a checkpoint that holds a masked-LM
head (what `kbert pretrain` writes, transformers' `BertForMaskedLM` / `BertForPreTraining`,
Google's release) and `FillMaskTask`, the spec `kbert predict` answers one with."""

import numpy as np

from kbert.models import BertPretrainer
from kbert.config_checks import RowError
from kbert.tasks.spec import TaskSpec


def fill_mask(model, texts, top_k=5, marker="[MASK]", batch_size=32, tokenizer=None):
    """Fills the blanks of `texts` with a masked LM, as Hugging Face's fill-mask pipeline does.

    Each blank (`marker`) is scored on its own by the masked-LM head of `model`, and its
    `top_k` likeliest word pieces are returned.

    Args:
      model: a bidirectional `BertPretrainer` (not a causal one), as
        `BertPretrainer.from_pretrained` builds it from a checkpoint with a masked-LM head.
      texts: a string, or a list of strings, each with at least one blank.
      top_k: how many pieces to return for each blank.
      marker: the string that marks a blank.
      batch_size: the texts scored at a time.
      tokenizer: the `BertTokenizer` to read with; None for the model's preprocessor's. Texts
        are packed to the preprocessor's sequence length, or else to the model's positions.

    Returns:
      Per text (a list, or one answer for a single string) a dict: "blanks", for each blank in
      order a list of `top_k` dicts `{"token", "id", "score"}` (score: the softmax
      probability), likeliest first; and "filled", the text with each blank replaced by its
      likeliest piece. A blank past the sequence length is refused.

    Examples:
        A tiny model with random weights (its pieces are arbitrary; a pre-trained one, such as
        `kbert.BertPretrainer.from_pretrained(checkpoint_dir)`, answers sensibly):

        >>> import kbert
        >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> preprocessor = kbert.BertMaskedLMPreprocessor(tokenizer, sequence_length=32)
        >>> model = kbert.BertPretrainer(backbone, use_nsp=False, preprocessor=preprocessor)
        >>> answer = kbert.fill_mask(model, "Paris is the [MASK] of France.", top_k=3)
        >>> sorted(answer), len(answer["blanks"]), len(answer["blanks"][0])
        (['blanks', 'filled'], 1, 3)
        >>> sorted(answer["blanks"][0][0])
        ['id', 'score', 'token']
        >>> answer["filled"].startswith("Paris is the ")
        True
        >>> answers = kbert.fill_mask(model, ["A [MASK] day.", "[MASK] and [MASK]."], top_k=2)
        >>> [len(a["blanks"]) for a in answers]
        [1, 2]
    """
    from kbert.config import INPUT_KEYS
    from kbert.text.fill_mask_preprocessor import BertFillMaskPreprocessor
    from kbert.text.trim import trim_to_longest

    if getattr(model, "mlm_head", None) is None:
        raise TypeError(f"fill_mask takes a BertPretrainer, got {type(model).__name__}.")
    packer = model.preprocessor
    if tokenizer is None and packer is None:
        raise ValueError("This BertPretrainer holds no preprocessor: pass its tokenizer "
                         "(fill_mask(model, texts, tokenizer=...)).")
    if model.backbone.causal:
        raise ValueError("A left-to-right (causal) model predicts each next token, not blanks: "
                         "fill_mask needs a masked LM.")
    if int(top_k) < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}.")
    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    for text in texts:
        if marker not in text:
            raise ValueError(f"No blank ({marker}) to fill in {text[:80]!r}.")
    tokenizer = tokenizer or packer.tokenizer
    length = packer.sequence_length if packer is not None else \
        model.backbone.config.max_position_embeddings
    preprocessor = BertFillMaskPreprocessor(tokenizer, length, marker=marker)
    vocabulary = tokenizer.get_vocabulary()
    answers = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        features = _packed(preprocessor, chunk, start, single)
        inputs = {k: np.asarray(v) for k, v in trim_to_longest(
            {k: features[k] for k in INPUT_KEYS}).items()}
        positions = np.asarray(features["masked_positions"])
        logits = model.predict_on_batch({**inputs, "masked_positions": positions})["mlm"]
        logits = np.asarray(logits, "float64")
        scores = np.exp(logits - logits.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        for text, row, row_scores in zip(chunk, positions, scores):
            blanks = [_likeliest(s, top_k, vocabulary) for s in row_scores[:np.sum(row > 0)]]
            answers.append({"blanks": blanks, "filled": _filled(text, marker, blanks)})
    return answers[0] if single else answers


def _packed(preprocessor, chunk, start, single):
    """`preprocessor`'s features of the texts `chunk` (TensorFlow's: numpy arrays go to any
    backend), from `texts[start]` on. A blank past the sequence length is a `RowError` naming
    its text (the preprocessor's check says only that one is)."""
    import tensorflow as tf

    try:
        return preprocessor(chunk)
    except tf.errors.InvalidArgumentError:
        for row, text in enumerate(chunk):
            try:
                preprocessor([text])
            except tf.errors.InvalidArgumentError:
                length = preprocessor.sequence_length
                error = RowError(
                    f"A blank ({preprocessor.marker}) in {{where}} is past the sequence length "
                    f"{length}: it falls after the first {length - 2} tokens, which is all the "
                    "model reads; put it earlier or cut what comes before it.", start + row)
                if single:
                    raise ValueError(error.at("the text")) from None
                raise error from None
        raise


def _likeliest(scores, top_k, vocabulary):
    ids = np.argsort(-scores, kind="stable")[:top_k]
    return [{"token": vocabulary[i], "id": int(i), "score": float(scores[i])} for i in ids]


def _filled(text, marker, blanks):
    """`text` with each blank replaced by its likeliest piece (a "##" suffix without its
    marks, so "play[MASK]" may read "playing")."""
    pieces = text.split(marker)
    words = [b[0]["token"].removeprefix("##") for b in blanks]
    return "".join(p + w for p, w in zip(pieces, words + [""]))


def open_masked_lm(path, allow_pickle=False):
    """A `BertPretrainer` (no NSP head) with the masked-LM head of the checkpoint directory
    `path`, and its tokenizer in a preprocessor; None when `path` is no checkpoint directory
    (a run, a file). A checkpoint with an encoder alone is refused by name."""
    import pathlib
    import warnings

    from kbert.convert import CheckpointError, detect_format
    from kbert.models.pretrained import load_backbone_and_tokenizer, preprocessor_for
    from kbert.presets import load_pretraining_heads
    from kbert.runs import RunDirectory

    if not pathlib.Path(path).is_dir() or RunDirectory.is_run(path):
        return None
    try:
        detect_format(path)
    except CheckpointError:
        return None
    with warnings.catch_warnings():  # a masked LM without a pooler needs none to fill blanks
        warnings.filterwarnings("ignore", message=".*holds no pooler")
        backbone, tokenizer = load_backbone_and_tokenizer(str(path), allow_pickle=allow_pickle)
        if backbone.causal:
            raise ValueError(f"{path} is a left-to-right (causal) model: it predicts each next "
                             "token, not blanks.")
        model = BertPretrainer(backbone, use_nsp=False, preprocessor=preprocessor_for(
            BertPretrainer, tokenizer, max_positions=backbone.config.max_position_embeddings))
        heads = load_pretraining_heads(model, str(path), allow_pickle)
    if "masked LM" not in heads:
        raise ValueError(
            f"{path} holds an encoder without a fine-tuned head or a masked-LM head, so it has "
            f"nothing to answer with: fine-tune it first (kbert finetune --init {path} ...), "
            f"or convert it for TF Hub (kbert convert {path} DST --to tf_hub) to serve the "
            "encoder's outputs.")
    return model


class FillMaskTask(TaskSpec):
    """How `kbert predict` and `kbert export` answer a masked LM: blanks filled, `top_k`
    pieces each. It fine-tunes nothing and is scored on no data."""

    name = "fill_mask"
    kind = "fill_mask"
    modes = ()
    model_classes = (BertPretrainer,)

    def __init__(self, top_k=5):
        self.top_k = int(top_k)

    def predict(self, model, text=None, **others):
        unused = sorted(k for k, v in others.items() if v is not None)
        if text is None or unused:
            raise ValueError("A masked LM fills the blanks ([MASK]) of text: give text alone"
                             + (f", not {', '.join(unused)}." if unused else "."))
        return fill_mask(model, text, self.top_k)

    def info(self):
        return {"top_k": self.top_k}
