"""`fit(class_weight=...)` for a head that scores every token. Keras turns class weights into
one weight an example, reading [batch, seq] tag labels as one-hot rows (their argmax: a
position), and refuses them beside sample weights, so a tagger's `fit` failed ("Incompatible
shapes: [2,16] vs. [2]"; with token weights or raw text: "class_weight and sample_weight at the
same time"). Here each token takes its tag's weight, times the token weights it already had
(`kbert.tensorflow_class_weights`, from the table checked here)."""

import numpy as np


def class_weight_table(class_weight, classes):
    """float32 [classes]: `class_weight` ({class id: weight}; unnamed classes weigh 1), checked."""
    if not isinstance(class_weight, dict):
        raise TypeError("class_weight is a dict {class id: weight}, got "
                        f"{type(class_weight).__name__}.")
    table = np.ones(classes, "float32")
    for key, weight in class_weight.items():
        if not (isinstance(key, (int, np.integer)) and 0 <= key < classes):
            raise ValueError(f"class_weight names class {key!r}; the head has classes 0 to "
                             f"{classes - 1}.")
        if not (isinstance(weight, (int, float, np.number)) and np.isfinite(weight)
                and weight >= 0):
            raise ValueError(f"class_weight of class {key} must be a finite number >= 0, got "
                             f"{weight!r}.")
        table[key] = weight
    return table
