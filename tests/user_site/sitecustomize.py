"""Loaded by every process the tests start (tests/conftest.py puts this folder on PYTHONPATH):
the process sees the packages of a user's install, not the test extra's references.

TensorFlow imports JAX (tf.lite's JAX converter) and Keras imports scikit-learn (its sklearn
wrappers) at start-up whenever they are installed: 1.5 of the ~7 CPU seconds every `kbert`
command spends importing, in processes that use neither. A `None` in sys.modules makes
`import` fail and `importlib.util.find_spec` answer None, as for a package that is not
installed. JAX stays for processes run on Keras' JAX backend.
"""

import os
import sys

for _name in ("sklearn",) + (() if os.environ.get("KERAS_BACKEND") == "jax" else ("jax",)):
    sys.modules.setdefault(_name, None)
