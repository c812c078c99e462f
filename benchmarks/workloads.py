"""The crash children of the replay measurement.

The workload itself (a workflow of N trivial steps, and its bare-sqlite3 and write()
twins) lives in durable_lite/lab/ladder.py, so this benchmark and lesson 13 time the same
code. A crash child imports this module by name, which registers the workflow in that
process too. It needs only durable_lite and the standard library; DBOS lives in
`dbos_workload.py`.
"""

import os
import signal

import durable_lite as dl
from durable_lite.lab import ladder


def bare_crash_child(path, n, run_id):
    """Child process: commit n rows the bare way, then die by SIGKILL (no close, no flush)."""
    db = ladder.open_bare(path, "NORMAL")
    ladder.bare_steps(db, run_id, n)
    os.kill(os.getpid(), signal.SIGKILL)


def durable_lite_crash_child(path, n, run_id):
    """Child process: run the workflow on SQLiteStore and SIGKILL the process right after
    step n's checkpoint commits, so the run has n completed steps and no result."""
    engine = dl.Engine(dl.SQLiteStore(path), crash_at=dl.faults.CrashAt(
        ladder.STEP_NAME, dl.faults.AFTER_CHECKPOINT, occurrence=n, kill=True))
    engine.start(ladder.ladder_steps, n, run_id=run_id)
