"""kbert's update rules, Keras optimizers that step as their papers write them on every
backend: Adam and AdamW (Kingma & Ba's Algorithm 1), LAMB (You et al. 2019)."""

from kbert.optimizers.adam import Adam, AdamW
from kbert.optimizers.lamb import Lamb

__all__ = ["Adam", "AdamW", "Lamb"]
