"""Tuple labels and sample weights of a head with several outputs, paired with the outputs in
the order the model declares them."""

import numpy as np


def by_output(outputs, values, what="label"):
    """`values` (a tuple or list, one per output) as a dict by output name, in the order
    `outputs` (the model's output dict) declares them: a span model's `(start, end)`, as
    Hugging Face's `start_positions, end_positions`. Keras would pair a tuple with the outputs
    sorted by name, and so train end logits on start positions, silently. Anything else is
    returned as it is, and a list of numbers is one array (a weight or label an example)."""
    if not (isinstance(values, (tuple, list)) and isinstance(outputs, dict)
            and len(outputs) > 1):
        return values
    if values and all(v is not None and np.ndim(v) == 0 and not isinstance(v, (str, bytes))
                      for v in values):
        return np.asarray(values)
    if len(values) != len(outputs):
        raise ValueError(f"{len(values)} {what} arrays for the {len(outputs)} outputs "
                         f"{', '.join(outputs)}: give one per output, in that order, or a "
                         "dict by output name.")
    return dict(zip(outputs, values))
