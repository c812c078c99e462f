"""Where the suite's CPU goes: per test, the CPU of the worker and of every process it started.

    DURABLE_LITE_SUITE_CPU=cpu.jsonl make test        # one line per test, from every worker
    python tests/tools/suite_cpu.py cpu.jsonl [N]      # the N costliest files and tests

`make test` runs four workers on two cores and keeps both busy from start to end, so the
suite's time is its CPU divided by two: what a file costs is its CPU, not the seconds
`--durations` shows (a test that waits on a deadline costs little; one that looks quick may
have had a whole core). Most of that CPU is not the worker's own but its children's:
kernels, browsers, servers, the processes a check forks. Each test is charged with what
changed while it ran in

- the worker's own CPU and that of the children it has waited for (`getrusage`), and
- every descendant still alive, with what *it* has waited for: a fork server's children end
  inside it, long before the fork server does, and only its `cutime` says what they cost.

What is not charged to a test: collection, and a process that outlives the worker's
descendants (one handed to init). A descendant that ends unwaited until a later test is
charged to the test that waits for it (a subreaper sweep, a `Popen` reaped on the next
`Popen`): the totals per file hold better than a single test's. Linux only: it reads /proc.
"""

import collections
import json
import os
import resource
import sys
import time

import pytest

from durable_lite.grading import reaper

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu() -> float:
    """CPU seconds of this process, of the children it has waited for, and of every live
    descendant (the grader's own process table, reaper.py), each with what it has waited
    for."""
    total = 0.0
    for pid in reaper.descendants({os.getpid()}):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:               # ended since the table was read
            continue
        total += sum(int(x) for x in fields[11:15]) / TICKS   # utime stime cutime cstime
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime + total


def register_if_asked(config) -> None:
    """A conftest's pytest_configure calls this: with DURABLE_LITE_SUITE_CPU=FILE set, each
    test's CPU is appended to FILE. Off by default."""
    path = os.environ.get("DURABLE_LITE_SUITE_CPU")
    if path:
        config.pluginmanager.register(SuiteCpu(os.path.abspath(path)), "suite-cpu")


class SuiteCpu:
    """The pytest plugin: appends {"id", "cpu", "wall"} for each test to `path` (every worker
    appends to the same file, a line at a time)."""

    def __init__(self, path):
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu, wall = tree_cpu(), time.monotonic()
        yield
        line = {"id": item.nodeid, "cpu": round(tree_cpu() - cpu, 3),
                "wall": round(time.monotonic() - wall, 3)}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def summary(rows, most=30) -> str:
    files = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for row in rows:
        kept = files[row["id"].split("::")[0]]
        kept[0] += row["cpu"]
        kept[1] += row["wall"]
        kept[2] += 1
    cpu = sum(row["cpu"] for row in rows)
    lines = [f"{len(rows)} tests, {cpu:.0f} CPU-s "
             f"(on two cores, about {cpu / 2:.0f} s of the suite)",
             "", "  CPU-s  share  wall-s  tests  file"]
    for name, (spent, wall, count) in sorted(files.items(), key=lambda kv: -kv[1][0])[:most]:
        lines.append(f"{spent:7.1f} {100 * spent / cpu:5.1f}% {wall:7.1f} {count:6d}  {name}")
    lines += ["", "  CPU-s  wall-s  test"]
    for row in sorted(rows, key=lambda r: -r["cpu"])[:most]:
        lines.append(f"{row['cpu']:7.1f} {row['wall']:7.1f}  {row['id'][:110]}")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        found = [json.loads(line) for line in f if line.strip()]
    print(summary(found, int(sys.argv[2]) if len(sys.argv) > 2 else 30))
