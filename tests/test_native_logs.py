"""TensorFlow's C++ start-up notices are dropped; anything else written to fd 2 is kept."""

import os

from kbert_cli import native_logs

# Lines as TensorFlow 2.21 printed them on this project's CPU machines.
NOTICES = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1795553959.357388   25393 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.\n"
    "I0000 00:00:1795553959.423278   25393 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.\n"
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
    "with the appropriate compiler flags.\n"
    "E0000 00:00:1795553963.405330   25393 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n")
REAL = "E0000 00:00:1795553963.5   25393 op_kernel.cc:1857] OP_REQUIRES failed: out of memory\n"


def test_known_notices_are_dropped_and_the_rest_kept(capfd, monkeypatch):
    monkeypatch.delenv("KBERT_LOG", raising=False)
    with native_logs.without_known_notices():
        os.write(2, (NOTICES + REAL).encode())
    assert capfd.readouterr().err == REAL


def test_kbert_log_keeps_everything(capfd, monkeypatch):
    monkeypatch.setenv("KBERT_LOG", "1")
    with native_logs.without_known_notices():
        os.write(2, NOTICES.encode())
    assert capfd.readouterr().err == NOTICES


def test_lines_written_during_a_failure_still_reach_the_user(capfd, monkeypatch):
    monkeypatch.delenv("KBERT_LOG", raising=False)
    try:
        with native_logs.without_known_notices():
            os.write(2, REAL.encode())
            raise ImportError("broken install")
    except ImportError:
        pass
    assert capfd.readouterr().err == REAL
