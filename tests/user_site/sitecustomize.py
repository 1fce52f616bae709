"""Loaded by every process the tests start (tests/conftest.py puts this folder on PYTHONPATH):
the process sees the packages of a user's install, not the test extra's references.

TensorFlow imports JAX (tf.lite's JAX converter) and Keras imports scikit-learn (its sklearn
wrappers) at start-up whenever they are installed: `import kbert` took 9.4 CPU seconds with
them and 6.6 without (2-core AMD EPYC), in processes that use neither. A `None` in sys.modules
makes `import` fail and `importlib.util.find_spec` answer None, as for a package that is not
installed. JAX stays for processes run on Keras' JAX backend. KBERT_TESTS_WITHOUT (names,
comma-separated) hides more: the GPU harness's tests run without TensorFlow, as on the GPU image.

With KBERT_PROCESS_LOG=FILE each process also appends a JSON line to FILE at exit (its command,
the test that started it, CPU and wall seconds): `python -m benchmarks.suite_processes FILE`
says where the suite's processes spend their time.
"""

import os
import sys

_hidden = ["sklearn"] + ([] if os.environ.get("KERAS_BACKEND") == "jax" else ["jax"])
for _name in _hidden + list(filter(None, os.environ.get("KBERT_TESTS_WITHOUT", "").split(","))):
    sys.modules.setdefault(_name, None)

if os.environ.get("KBERT_PROCESS_LOG"):
    import atexit
    import json
    import resource
    import time

    _began = time.time()

    def _log():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        line = {"argv": [str(a) for a in sys.argv[:3]], "wall": time.time() - _began,
                "cpu": usage.ru_utime + usage.ru_stime,
                "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]}
        with open(os.environ["KBERT_PROCESS_LOG"], "a") as log:
            log.write(json.dumps(line) + "\n")

    atexit.register(_log)
