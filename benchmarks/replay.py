"""Replaying: what it costs to pick a run up again after its process was SIGKILLed.

A child process completes N steps and is killed before the workflow ends. This process
then opens the file and reads the rows back the bare way (SELECT, and SELECT + json.loads
of every result: the least any replay must do), loads them with durable_lite, resumes the
run (all N steps answered from checkpoints), and lets DBOS (on SQLite) recover it.

The resume runs on a store killed for it alone, as a real restart finds it: with the dead
process's log still there. Opening that store folds the log into the file (SQLiteStore's
_fold_long_log); that open is its own row, beside a bare open of a crashed file.
"""

import json
import os
import signal
import sqlite3
import time

import durable_lite as dl
from durable_lite.lab import ladder

from support import fmt, python_child, summary

# key -> (what, baseline key): loading is compared with reading the rows, replaying with
# reading them and decoding every result.
REPLAY_ROWS = {
    "sqlite_open": ("bare sqlite3 open of the crashed file", "sqlite_open"),
    "dl_open": ("durable_lite SQLiteStore() of the crashed store", "sqlite_open"),
    "sqlite_select": ("bare sqlite3 SELECT of the N rows", "sqlite_select"),
    "sqlite_select_json": ("bare sqlite3 SELECT + json.loads of the N rows", "sqlite_select_json"),
    "dl_load": ("durable_lite load_entries (one query)", "sqlite_select"),
    "dl_resume": ("durable_lite resume, replaying N steps", "sqlite_select_json"),
    "dbos_replay": ("DBOS recovery: workflow body replaying N steps", "sqlite_select_json"),
    "dbos_recover": ("DBOS recovery: launch -> N steps replayed", "sqlite_select_json"),
}
FLOOR_NAMES = {"sqlite_open": "open", "sqlite_select": "SELECT",
               "sqlite_select_json": "SELECT + json.loads"}


def crash_bare(path, n, run_id):
    proc = python_child(f"import workloads; workloads.bare_crash_child({path!r}, {n}, {run_id!r})")
    expect_killed(proc, "bare sqlite3")


def crash_durable_lite(path, n, run_id):
    proc = python_child(f"import workloads; workloads.durable_lite_crash_child({path!r}, {n}, "
                        f"{run_id!r})")
    expect_killed(proc, "durable_lite")


def crash_dbos(url, n, workflow_id):
    proc = python_child(f"import dbos_workload; dbos_workload.crash_child({url!r}, {n}, "
                        f"{workflow_id!r})")
    expect_killed(proc, "DBOS")


def expect_killed(proc, who):
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the {who} crash child exited with {proc.returncode} instead of "
                           f"being killed:\n{proc.stderr[-2000:]}")


def bare_open(path):
    """Connect and read the schema, as any first use of a crashed file does (SQLite reads
    the dead process's log back in then)."""
    start = time.perf_counter_ns()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("SELECT name FROM sqlite_master").fetchall()
    elapsed = (time.perf_counter_ns() - start) / 1e9
    db.close()
    return elapsed


def bare_select(path, run_id, n, decode=False):
    """The rows read back the bare way; with `decode`, every result json.loads'ed too."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("SELECT name FROM sqlite_master").fetchall()   # as SQLiteStore does on open
        start = time.perf_counter_ns()
        rows = db.execute(ladder.SELECT_ROWS, (run_id,)).fetchall()
        if decode:
            results = [json.loads(row[4]) for row in rows]
        elapsed = (time.perf_counter_ns() - start) / 1e9
    finally:
        db.close()
    assert len(rows) == n, (path, len(rows))
    if decode:
        assert results == list(range(n)), results[:5]
    return elapsed


def dl_load(path, run_id, n):
    store = dl.SQLiteStore(path)               # opening (and its schema check) is not timed
    try:
        start = time.perf_counter_ns()
        entries = store.load_entries(run_id)
        elapsed = (time.perf_counter_ns() - start) / 1e9
    finally:
        store.close()
    assert len(entries) == n, (path, len(entries))
    return elapsed


def dl_resume(path, run_id, n):
    """(the open of the crashed store, the resume) in seconds."""
    start = time.perf_counter_ns()
    store = dl.SQLiteStore(path)
    opened = (time.perf_counter_ns() - start) / 1e9
    try:
        engine = dl.Engine(store)
        start = time.perf_counter_ns()
        run = engine.resume(run_id)
        elapsed = (time.perf_counter_ns() - start) / 1e9
    finally:
        store.close()
    assert run.status == dl.COMPLETED and len(run.replayed) == n and not run.executed, run
    return opened, elapsed


def dbos_recover(dbos_workload, url, workflow_id, n):
    """Launch DBOS on the crashed database; it recovers the pending workflow by itself.

    Returns (launch -> last step replayed, workflow body alone). The first includes the
    internal queue's polling delay; the second is the replay work proper.
    """
    from dbos import DBOS

    dbos_workload.body_done.clear()
    DBOS(config=dbos_workload.config(url))
    try:
        start = time.perf_counter()
        DBOS.launch()
        if not dbos_workload.body_done.wait(120):
            raise RuntimeError(f"DBOS did not recover workflow {workflow_id!r} within 120 s")
        total = time.perf_counter() - start
        body_start, body_end = dbos_workload.body_times[-1]
        result = DBOS.retrieve_workflow(workflow_id).get_result()
    finally:
        DBOS.destroy()
    assert result == n, result
    return total, body_end - body_start


def measure_replay(folder, n, repeats, dbos_workload, progress):
    seconds = {key: [] for key in REPLAY_ROWS}
    for r in range(repeats):
        bare_path = os.path.join(folder, f"replay-bare-{n}-{r}.db")
        run_id = ladder.new_run_id()          # the same id on both sides
        crash_bare(bare_path, n, run_id)
        seconds["sqlite_open"].append(bare_open(bare_path))
        seconds["sqlite_select"].append(bare_select(bare_path, run_id, n))
        seconds["sqlite_select_json"].append(bare_select(bare_path, run_id, n, decode=True))

        dl_path = os.path.join(folder, f"replay-dl-{n}-{r}.db")
        crash_durable_lite(dl_path, n, run_id)
        seconds["dl_load"].append(dl_load(dl_path, run_id, n))
        resume_path = os.path.join(folder, f"replay-dl-resume-{n}-{r}.db")
        crash_durable_lite(resume_path, n, run_id)      # a store killed for the resume alone
        opened, resumed = dl_resume(resume_path, run_id, n)
        seconds["dl_open"].append(opened)
        seconds["dl_resume"].append(resumed)

        if dbos_workload is not None:
            url = dbos_workload.sqlite_url(os.path.join(folder, f"replay-dbos-{n}-{r}.sqlite"))
            crash_dbos(url, n, f"crashed-{n}-{r}")
            total, body = dbos_recover(dbos_workload, url, f"crashed-{n}-{r}", n)
            seconds["dbos_recover"].append(total)
            seconds["dbos_replay"].append(body)
        progress.say(f"replay, N={n}: crash and recovery {r + 1}/{repeats} done")
    records = [replay_record(key, n, values) for key, values in seconds.items() if values]
    for rec in records:
        progress.say(f"  {rec['system']:<48} N={n:<5} {fmt(rec['median_ms']):>8} ms")
    return records


def replay_record(key, n, seconds):
    system, baseline = REPLAY_ROWS[key]
    ms = [s * 1e3 for s in seconds]
    return {"key": key, "system": system, "n": n, "repeats": len(ms), "baseline": baseline,
            "ms": ms, **{f"{k}_ms": v for k, v in summary(ms).items()},
            "per_step_us_median": summary(ms)["median"] / n * 1e3}
