"""`import durable_lite` in fresh interpreters, timed inside them (start-up not included).

Two ways: with the package's bytecode cached (as for every import after the first one on
a machine), and compiling every module from source (as on a machine that sets
PYTHONDONTWRITEBYTECODE, where nothing is ever cached). The target applies to the first.
"""

import tempfile

from support import python_child, summary

CODE = ("import time; t = time.perf_counter(); import durable_lite; "
        "print(time.perf_counter() - t)")


def _times(repeats, env_changes):
    ms = []
    for _ in range(repeats):
        proc = python_child(CODE, timeout=60, env_changes=env_changes)
        if proc.returncode != 0:
            raise RuntimeError(f"importing durable_lite failed:\n{proc.stderr}")
        ms.append(float(proc.stdout.strip()) * 1e3)
    return {"repeats": repeats, "ms": ms, **{f"{k}_ms": v for k, v in summary(ms).items()}}


def measure_import(repeats):
    """(bytecode cached, compiling every module): each {"ms": [...], "median_ms": ...}."""
    with tempfile.TemporaryDirectory(prefix="dl-bench-pycache-") as cache:
        cached = {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": cache}
        python_child("import durable_lite", env_changes=cached)        # fills the cache
        warm = _times(repeats, cached)
    return warm, _times(repeats, {"PYTHONDONTWRITEBYTECODE": "1"})
