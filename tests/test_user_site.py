"""Processes the tests start see a user's install (tests/user_site/sitecustomize.py): kbert's
commands are tested without the test extra's JAX and scikit-learn, which would otherwise be
imported at start-up by TensorFlow and Keras in every one of them."""

import importlib.util
import os
import subprocess
import sys

import pytest

FOUND = "import importlib.util; print([importlib.util.find_spec(n) is not None for n in ('sklearn', 'jax')])"


@pytest.mark.parametrize("backend, expected", [("tensorflow", "[False, False]"),
                                               ("jax", "[False, True]")])
def test_a_started_process_finds_only_what_its_backend_needs(backend, expected):
    assert importlib.util.find_spec("sklearn") and importlib.util.find_spec("jax")  # here: yes
    done = subprocess.run([sys.executable, "-c", FOUND], capture_output=True, text=True,
                          env={**os.environ, "KERAS_BACKEND": backend}, check=True)
    assert done.stdout.strip() == expected
