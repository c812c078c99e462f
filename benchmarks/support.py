"""Small things every part of the benchmark uses: statistics, child interpreters, progress.

Progress goes to stderr, line by line, as each row is measured (a full run takes a few
minutes); the report goes to stdout at the end.
"""

import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def python_child(code, timeout=300, env_changes=None):
    """Run `code` in a fresh interpreter that can import this folder's modules.
    `env_changes`: variables to set, or (with None) to remove, for that interpreter."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH", "")) if p)
    for name, value in (env_changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


class Progress:
    """Lines on stderr, each stamped with the seconds since the benchmark began. Also
    samples the 1-minute load average at every line, so the saved run can say how busy
    the machine was while it ran, not only before and after."""

    def __init__(self, quiet=False):
        self.began = time.perf_counter()
        self.quiet = quiet
        self.loads = [os.getloadavg()[0]]

    def say(self, text):
        self.loads.append(os.getloadavg()[0])
        if not self.quiet:
            print(f"[{time.perf_counter() - self.began:6.1f} s] {text}", file=sys.stderr,
                  flush=True)

    @property
    def elapsed(self):
        return time.perf_counter() - self.began


def fmt(value, digits=3):
    """A number with about `digits` significant digits, never in scientific notation."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{decimals}f}"
