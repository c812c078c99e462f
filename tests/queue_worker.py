"""A worker process for test_queue_workers.py, and the workflow its queue holds.

    python queue_worker.py STORE FOLDER QUEUE_JSON

The worker calls engine.work(queue) until nothing is queued or unfinished. The test kills
workers with SIGKILL at random moments and starts new ones.

The concurrency a queue really allowed is measured here, not taken from the workers'
word: the first step of every run writes "begin" into a log file before it does anything,
and the last step writes "end" when it is done. The log's own row numbers order the lines
across processes (each insert is one SQLite transaction), and a run holds its slot from
before its first "begin" until after its last "end", so no more runs can overlap between
those lines than the queue let hold a slot at once.
"""

import json
import os
import sqlite3
import sys
import time

import durable_lite as dl
from durable_lite.store.sqlite import enable_wal

STEP_SECONDS = 0.01           # long enough for kills to land inside steps


def _log_db(folder):
    os.makedirs(folder, exist_ok=True)
    db = sqlite3.connect(os.path.join(folder, "slots.db"), timeout=30, isolation_level=None)
    enable_wal(db)
    db.execute("CREATE TABLE IF NOT EXISTS log (n INTEGER PRIMARY KEY AUTOINCREMENT, "
               "run_id TEXT, tenant TEXT, mark TEXT, pid INTEGER)")
    return db


_logs = {}


def mark(folder, run_id, tenant, what):
    if folder not in _logs:
        _logs[folder] = _log_db(folder)
    _logs[folder].execute("INSERT INTO log (run_id, tenant, mark, pid) VALUES (?, ?, ?, ?)",
                          (run_id, tenant, what, os.getpid()))


def log(folder):
    return _log_db(folder).execute("SELECT n, run_id, tenant, mark, pid FROM log ORDER BY n").fetchall()


def first(folder, run_id, tenant):
    mark(folder, run_id, tenant, "begin")
    time.sleep(STEP_SECONDS)
    return "first"


def middle():
    time.sleep(STEP_SECONDS)
    return "middle"


def last(folder, run_id, tenant):
    time.sleep(STEP_SECONDS)
    mark(folder, run_id, tenant, "end")
    return "last"


@dl.workflow("queue-worker-job")
def job(ctx, folder, tenant):
    ctx.step("first", first, folder, ctx.run_id, tenant)
    ctx.step("middle", middle)
    return ctx.step("last", last, folder, ctx.run_id, tenant)


def peaks(folder):
    """(most runs holding a slot at once, {tenant: the most of its runs at once}), from the
    log: a run counts from its first "begin" to its last "end"."""
    spans = {}
    for n, run_id, tenant, what, _ in log(folder):
        begin, end, _ = spans.get(run_id, (None, None, tenant))
        if what == "begin":
            begin = n if begin is None else begin
        else:
            end = n
        spans[run_id] = (begin, end, tenant)
    events = sorted([(b, 1, t) for b, e, t in spans.values()] +
                    [(e, -1, t) for b, e, t in spans.values()])
    now, per, peak, peak_per = 0, {}, 0, {}
    for _, delta, tenant in events:
        now += delta
        per[tenant] = per.get(tenant, 0) + delta
        peak = max(peak, now)
        peak_per[tenant] = max(peak_per.get(tenant, 0), per[tenant])
    return peak, peak_per


def main(store_path, folder, queue_json):
    spec = json.loads(queue_json)
    queue = dl.Queue.from_json(spec["name"], spec["limits"])
    # The test kills workers at random, and on a busy machine a run can be caught at the
    # same step five times in a row: the poison-run rule (test_longlived_dead_runs.py)
    # would declare it dead. Here every run must complete, so that rule is off.
    engine = dl.Engine(dl.SQLiteStore(store_path), max_interruptions=None)
    engine.work(queue, poll=0.005)


if __name__ == "__main__":
    main(*sys.argv[1:4])
