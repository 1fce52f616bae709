"""Pictures of what BERT attends to."""

from kbert.viz.attention import attention_maps, plot_attention
from kbert.viz.seed_view import SeedView, plot_seed_view, seed_view
from kbert.viz.tensorboard import AttentionImages, heatmap_image
