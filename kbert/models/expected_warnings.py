"""`expected_warnings_hidden`: Keras warnings that kbert's own datasets and heads raise when
nothing is wrong, hidden around a task model's `fit`, `evaluate` and `predict`."""

import contextlib
import warnings

# A head that reads the sequence output (spans, tags, masked LM alone) leaves the backbone's
# pooler without a gradient, and Keras warns of it in every `fit`. Any other variable without
# a gradient is still named.
POOLER_WITHOUT_GRADIENT = (r"Gradients do not exist for variables \['pooler/kernel', "
                           r"'pooler/bias'\] ")


@contextlib.contextmanager
def expected_warnings_hidden(packed_here, steps):
    """Hides the pooler's missing gradient, and Keras' "Your input ran out of data", which it
    gives whenever a dataset of unknown length ends, as if it had been cut short. The windows a
    span preprocessor makes of raw text are such a dataset (their number is known only once the
    contexts are tokenized): that warning is hidden where `steps` is None (the data decides the
    epoch) and `packed_here` (the datasets the model packed from raw text) holds one. With
    `steps` given, running out is a real problem, and the warning stays."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=POOLER_WITHOUT_GRADIENT)
        if steps is None and any(int(d.cardinality()) == -2 for d in packed_here):
            warnings.filterwarnings("ignore", message="Your input ran out of data",
                                    category=UserWarning)
        yield
