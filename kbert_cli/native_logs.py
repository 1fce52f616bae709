"""Keeps TensorFlow's C++ start-up lines off the terminal.

On a CPU machine, loading TensorFlow prints 4-6 lines from C++ that no Python setting reaches:
two absl banners ("All log messages before absl::InitializeLog() is called ..."), "Could not
find cuda drivers", the CPU-instructions notice and, at the first device query, an error-level
"failed call to cuInit". `TF_CPP_MIN_LOG_LEVEL` silences none of those printed before absl's
logging starts. So the `kbert` command loads TensorFlow and queries its devices with file
descriptor 2 pointed at a temporary file, then writes back every captured line that is not one
of these known notices: a real error at import still reaches the user.

`KBERT_LOG=1` (any non-empty value) turns this off and leaves TensorFlow's own level alone.
"""

import contextlib
import os
import re
import sys
import tempfile

KNOWN_NOTICES = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|cudart_stub\.cc.*Could not find cuda drivers"
    r"|cuda_platform\.cc.*failed call to cuInit"
    r"|cuda_(dnn|fft|blas)\.cc.*Unable to register"
    r"|computation_placer\.cc.*already registered"
    r"|cpu_feature_guard\.cc.*This TensorFlow binary is optimized"
    r"|^To enable the following instructions: .*rebuild TensorFlow"
    r"|oneDNN custom operations are on"
    r"|TF-TRT Warning: Could not find TensorRT"
    r"|util\.cc.*oneDNN supports DT_INT64 only on platforms with AVX-512")


def verbose():
    """Whether the user asked for TensorFlow's own log (`KBERT_LOG`)."""
    return bool(os.environ.get("KBERT_LOG"))


@contextlib.contextmanager
def without_known_notices():
    """Runs the block with fd 2 captured; afterwards writes back what is not a known notice."""
    if verbose():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode("utf-8", "replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not KNOWN_NOTICES.search(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


def load_tensorflow_quietly():
    """Imports TensorFlow (when installed) and initializes its devices inside
    `without_known_notices`, so that neither prints its notices later. Also meets, here, the
    error-level line oneDNN prints once per process on CPUs without AVX-512
    at the first tf.data function holding a ragged int64 concatenation, which every kbert
    preprocessor has: "oneDNN supports DT_INT64 only on platforms with AVX-512. Falling back
    to the default Eigen-based implementation", a fallback, not an error. Not where TF_CONFIG
    is set: see below. TensorFlow's C++ INFO and WARNING lines stay off too
    (`TF_CPP_MIN_LOG_LEVEL` 2), unless the user chose a level or set KBERT_LOG."""
    if not verbose():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with without_known_notices():
        try:
            import tensorflow as tf
        except ImportError:  # the JAX-only GPU image: nothing to quiet
            return
        tf.config.list_physical_devices()
        if not os.environ.get("TF_CONFIG"):
            # Runs an op, after which a multi-worker strategy (TF_CONFIG) could no longer
            # configure its collectives: such processes keep the oneDNN line.
            ids = tf.ragged.constant([[1]], tf.int64)
            dataset = tf.data.Dataset.from_tensors(ids).map(
                lambda r: tf.concat([r, r], 1).values)
            next(iter(dataset))
