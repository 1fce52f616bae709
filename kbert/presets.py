"""Named pretrained checkpoints that kbert can fetch itself (see `kbert.data.sources`)."""

import os
import pathlib

from kbert.data import sources

# preset name → artifact holding a Hugging Face BERT directory
WEIGHT_PRESETS = {
    "minilm_l6_h384_uncased": "minilm",
}


def resolve(path_or_preset) -> pathlib.Path:
    """The local directory for a checkpoint path or a weights preset name."""
    if isinstance(path_or_preset, str) and path_or_preset in WEIGHT_PRESETS:
        return sources.fetch(WEIGHT_PRESETS[path_or_preset])
    path = pathlib.Path(os.fspath(path_or_preset)).expanduser()
    if not path.exists():
        from kbert.config import PRESETS

        hint = (f" {path_or_preset!r} is a size preset without weights: build it with "
                f"BertBackbone(BertConfig.preset({path_or_preset!r}))."
                if path_or_preset in PRESETS else "")
        raise FileNotFoundError(
            f"No checkpoint at {path} and no weights preset of that name.{hint} Weights "
            f"presets: {', '.join(WEIGHT_PRESETS)}.")
    return path
