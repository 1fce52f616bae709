"""Processes the tests start see a user's install (tests/user_site/sitecustomize.py): kbert's
commands are tested without the test extra's JAX and scikit-learn, which would otherwise be
imported at start-up by TensorFlow and Keras in every one of them."""

import importlib.util
import os
import subprocess
import sys

import pytest

FOUND = ("import importlib.util; "
         "print([importlib.util.find_spec(n) is not None for n in ('sklearn', 'jax')])")


@pytest.mark.parametrize("backend, expected", [("tensorflow", "[False, False]"),
                                               ("jax", "[False, True]")])
def test_a_started_process_finds_only_what_its_backend_needs(backend, expected):
    assert importlib.util.find_spec("sklearn") and importlib.util.find_spec("jax")  # here: yes
    done = subprocess.run([sys.executable, "-c", FOUND], capture_output=True, text=True,
                          env={**os.environ, "KERAS_BACKEND": backend}, check=True)
    assert done.stdout.strip() == expected


def test_started_processes_log_their_time_for_the_summary(tmp_path):
    from benchmarks.suite_processes import summarize

    log = tmp_path / "processes.jsonl"
    env = {**os.environ, "KBERT_PROCESS_LOG": str(log)}
    busy = "sum(i * i for i in range(3_000_000))"
    for code in (busy, busy + "; import sys; sys.exit(3)"):
        subprocess.run([sys.executable, "-c", code], env=env)
    subprocess.run([sys.executable, "-m", "benchmarks.suite_processes", "--help"], env=env,
                   capture_output=True, check=True)
    found = summarize(log.read_text().splitlines())
    assert found["processes"] == 3  # an exit status other than 0 still logs
    here = os.environ["PYTEST_CURRENT_TEST"].split(" ")[0]
    assert [row[:2] for row in found["by_test"]] == [[here, 3]]
    by_command = {name: (n, cpu) for name, n, cpu in found["by_command"]}
    assert set(by_command) == {"python -c", "suite_processes.py"}
    assert by_command["python -c"][0] == 2 and by_command["python -c"][1] > 0.05
    assert found["cpu"] == pytest.approx(sum(cpu for _, _, cpu in found["by_command"]), abs=0.2)
