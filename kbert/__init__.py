"""kbert: BERT for Keras 3 and TensorFlow."""
