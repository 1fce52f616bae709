"""The GPU session runner (`benchmarks.gpu_session`): its plan parses with each module's own
parser, and its deadline holds on real processes (a step that overruns is killed with its
children, later steps are not started, every outcome is recorded)."""

import importlib
import json
import os
import textwrap
import time

import pytest

from benchmarks import gpu_session
from benchmarks.gpu_session import Step


@pytest.mark.parametrize("step", gpu_session.PLAN, ids=lambda step: step.name)
def test_each_planned_step_parses(step, tmp_path):
    args = importlib.import_module(step.module).parse(step.argv(str(tmp_path))[2:])
    assert args.out == str(tmp_path / f"{step.name}.json")


def alive(pid):
    """Whether process `pid` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def fake_modules(tmp_path, monkeypatch):
    """Modules the session runs as `python -m`: one that writes its --out, one that fails, one
    that sleeps with a child process that sleeps too (and says the child's pid)."""
    folder = tmp_path / "fake"
    folder.mkdir()
    (folder / "ok_step.py").write_text(textwrap.dedent("""
        import sys
        open(sys.argv[sys.argv.index("--out") + 1], "w").write("{}")
    """))
    (folder / "failing_step.py").write_text("import sys\nsys.exit(3)\n")
    (folder / "slow_step.py").write_text(textwrap.dedent("""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("child", child.pid, flush=True)
        time.sleep(60)
    """))
    monkeypatch.setenv("PYTHONPATH", f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return folder


def test_the_deadline_stops_the_session_and_kills_a_step_with_its_children(fake_modules,
                                                                              tmp_path):
    out = tmp_path / "out"
    steps = [Step("ok", "ok_step", ()), Step("fails", "failing_step", ()),
             Step("slow", "slow_step", ()), Step("after", "ok_step", ())]
    records = gpu_session.run(steps, str(out), seconds=6, extra=("--smoke",), min_start=2)
    assert [r["status"] for r in records] == ["done", "failed", "timed out", "not started"]
    assert [r["returncode"] for r in records[:2]] == [0, 3]
    assert records[0]["command"][-3:] == ["--out", str(out / "ok.json"), "--smoke"]
    assert (out / "ok.json").exists() and not (out / "after.json").exists()
    assert 3 < records[2]["seconds"] < 10
    log = (out / "session.log").read_text()
    assert log.count("==> ") == 3 and "==> after" not in log
    child = int(log.split("child ")[1].split()[0])
    deadline = time.monotonic() + 5  # SIGKILL lands when the child is next scheduled
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)  # the step's own child went with it
    assert json.loads((out / "session.json").read_text())["steps"] == records
    assert sorted(p.name for p in out.iterdir()) == ["ok.json", "session.json", "session.log"]


def test_dry_run_prints_each_command(capsys):
    assert gpu_session.main(["--dry-run", "--out-dir", "/x", "--steps", "no-triton-gemm"]) == 0
    line, = capsys.readouterr().out.splitlines()
    assert line == ("python3 -m benchmarks.gpu --xla-flags=--xla_gpu_enable_triton_gemm=false "
                    "--contestants kbert --out /x/no-triton-gemm.json")


def test_the_plan_fits_what_a_device_call_brings_back():
    assert len(gpu_session.PLAN) <= gpu_session.MAX_STEPS
    assert len({step.name for step in gpu_session.PLAN}) == len(gpu_session.PLAN)


def test_the_docstring_examples_parse():
    examples = [line.split("#")[0].split()[3:] for line in gpu_session.__doc__.splitlines()
                if line.strip().startswith("python3 -m benchmarks.gpu_session")]
    assert len(examples) == 3
    for argv in examples:
        gpu_session.parse(argv)  # argparse exits on an unknown flag or step
