"""Where the test suite's started processes spend their time: the lines that
tests/user_site/sitecustomize.py appends with KBERT_PROCESS_LOG set, summed by command and by
test.

    KBERT_PROCESS_LOG=/tmp/processes.jsonl make test
    python -m benchmarks.suite_processes /tmp/processes.jsonl

Processes killed with SIGKILL (tests/test_kills.py) write no line. The pytest workers are not
started by the tests and do not appear; `/usr/bin/time make test` gives the whole CPU.
"""

import argparse
import collections
import json
import os


def command(argv):
    """A short name for a process: `kbert predict`, a script's name, or `python -c`."""
    if not argv or argv[0] == "-c":
        return "python -c"
    name = os.path.basename(argv[0])
    if name in ("kbert", "__main__.py"):  # the script, or python -m kbert_cli
        return f"kbert {argv[1]}" if len(argv) > 1 else "kbert"
    if name == "ipykernel_launcher.py":
        return "notebook kernel"
    return name


def summarize(lines):
    """{"processes", "cpu", "by_command", "by_test"}: counts and CPU seconds, largest first."""
    rows = [json.loads(line) for line in lines if line.strip()]
    return {"processes": len(rows), "cpu": round(sum(r["cpu"] for r in rows), 1),
            "by_command": _totals(rows, lambda row: command(row["argv"])),
            "by_test": _totals(rows, lambda row: row["test"])}


def _totals(rows, key):
    """[[key, processes, CPU seconds]] of the rows grouped by `key(row)`, most CPU first."""
    sums = collections.defaultdict(lambda: [0, 0.0])
    for row in rows:
        sums[key(row)][0] += 1
        sums[key(row)][1] += row["cpu"]
    return sorted(([k, n, round(cpu, 1)] for k, (n, cpu) in sums.items()),
                  key=lambda item: -item[2])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    with open(args.log) as log:
        found = summarize(log)
    print(f"{found['processes']} processes, {found['cpu']} CPU seconds")
    for name in ("by_command", "by_test"):
        print(f"\n{name.replace('_', ' ')}: processes, CPU seconds")
        for key, n, cpu in found[name][:args.top]:
            print(f"{n:5d} {cpu:9.1f}  {key}")
    return found


if __name__ == "__main__":
    main()
