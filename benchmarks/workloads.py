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


def unstarted_run(path, run_id):
    """Child process: create a run of the workflow with no steps, leased to this process,
    and die before executing it: what resuming N=0 steps starts from (instructions.py)."""
    import time
    from durable_lite.lease import HOST
    from durable_lite.store.records import RUNNING, RunRecord

    store = dl.SQLiteStore(path)
    now = time.time()
    store.create_run(RunRecord(run_id, ladder.ladder_steps.name, ladder.ladder_steps.version,
                               "[0]", "{}", RUNNING, now, now,
                               lease_owner=f"{HOST}:{os.getpid()}:000000",
                               lease_expires=now + 30, taken_up_at=0))
    os.kill(os.getpid(), signal.SIGKILL)


_FAIL = [False]           # set in the process that records the failure, not in the resume


def _flaky():
    if _FAIL[0]:
        raise RuntimeError("the service is down")
    return "up"


@dl.workflow("ladder_fails_last", version=1)
def ladder_fails_last(ctx, n):
    """N trivial steps, then one that fails for good in the first process (no retry)."""
    for i in range(n):
        ctx.step(ladder.STEP_NAME, ladder.noop, i)
    return ctx.step(dl.Step("flaky", retry=dl.Retry(max_attempts=1)), _flaky)


def failed_run(path, n, run_id):
    """Child process: run `ladder_fails_last` until it fails: N checkpoints and a failure
    (a resume retries the failed step and replays the N before it)."""
    _FAIL[0] = True
    run = dl.Engine(dl.SQLiteStore(path)).start(ladder_fails_last, n, run_id=run_id)
    assert run.status == dl.FAILED, run
