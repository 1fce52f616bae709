"""Pictures of what BERT attends to."""

from kbert.viz.attention import attention_maps, plot_attention
