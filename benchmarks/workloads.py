"""The workload every system runs: a workflow of N trivial steps, plus its bare-sqlite3 twin.

The benchmark imports this module, and so do its crash children (`run_in_child` imports it
by name), so the workflow is registered in every process that runs or resumes it. It needs
only durable_lite and the standard library; DBOS lives in `dbos_workload.py`.
"""

import json
import os
import signal
import socket
import sqlite3
import time
import uuid

import durable_lite as dl
from durable_lite.store.schema import SCHEMA_1

STEP_NAME = "noop"


def noop(i):
    """The trivial step: no I/O, no work, so what is measured is the checkpoint around it."""
    return i


@dl.workflow("bench_steps", version=1)
def bench_steps(ctx, n):
    for i in range(n):
        ctx.step(STEP_NAME, noop, i)
    return n


# The bare baseline writes into a table of exactly the shape durable_lite uses for its
# checkpoints, so both sides commit the same row to the same kind of B-tree.
ENTRIES_TABLE = next(s for s in SCHEMA_1.split(";") if "CREATE TABLE entries" in s).strip()
INSERT_ROW = "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
SELECT_ROWS = ("SELECT position, kind, name, occurrence, result, attempts, started_at, "
               "ended_at, worker, cost FROM entries WHERE run_id = ? ORDER BY position")


def bare_run_id():
    """A run id as long as durable_lite's default ones, so both tables hold keys alike."""
    return f"bench_steps-{uuid.uuid4()}"


def worker_name():
    """A worker name shaped like durable_lite's (host:pid:6 hex digits)."""
    return f"{socket.gethostname()}:{os.getpid()}:000000"


def open_bare(path, synchronous="NORMAL"):
    """A plain connection with the settings SQLiteStore uses: WAL, autocommit, a sync level."""
    db = sqlite3.connect(path, isolation_level=None)   # autocommit: one INSERT = one transaction
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute(ENTRIES_TABLE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
    return db


def bare_steps(db, run_id, n, worker=None):
    """The least any checkpointing engine must do per step: call the step, serialise its
    result, and commit the row before moving on."""
    worker = worker or worker_name()
    for i in range(n):
        started = time.time()
        text = json.dumps(noop(i))
        db.execute(INSERT_ROW, (run_id, i, "step", STEP_NAME, i + 1, text, 1, started,
                                time.time(), worker, 0.0))


def bare_crash_child(path, n, run_id):
    """Child process: commit n rows the bare way, then die by SIGKILL (no close, no flush)."""
    db = open_bare(path, "NORMAL")
    bare_steps(db, run_id, n)
    os.kill(os.getpid(), signal.SIGKILL)


def durable_lite_crash_child(path, n, run_id):
    """Child process: run the workflow on SQLiteStore and SIGKILL the process right after
    step n's checkpoint commits, so the run has n completed steps and no result."""
    engine = dl.Engine(dl.SQLiteStore(path), crash_at=dl.faults.CrashAt(
        STEP_NAME, dl.faults.AFTER_CHECKPOINT, occurrence=n, kill=True))
    engine.start(bench_steps, n, run_id=run_id)
