"""A worker process for test_crash_workers.py, and the workflow it recovers.

    python core_worker.py STORE FOLDER

The worker calls engine.recover() until no unfinished run is left. The test kills workers
with SIGKILL at random moments and starts new ones. Every step function first writes a
line to an execution log (run, step, pid, time), so the test can prove that any step that
ran twice did so only because the worker running it the first time had been killed.
"""

import os
import sqlite3
import sys
import time

import durable_lite as dl
from durable_lite import examples as ex
from durable_lite.store.sqlite import enable_wal

STEP_SECONDS = 0.004          # long enough for kills to land inside steps


def _log_db(folder):
    os.makedirs(folder, exist_ok=True)
    db = sqlite3.connect(os.path.join(folder, "executions.db"), timeout=30, isolation_level=None)
    enable_wal(db)
    db.execute("CREATE TABLE IF NOT EXISTS executions (run_id TEXT, step TEXT, pid INTEGER, at REAL)")
    return db


_logs = {}


def executed(folder, run_id, step):
    if folder not in _logs:
        _logs[folder] = _log_db(folder)
    _logs[folder].execute("INSERT INTO executions VALUES (?, ?, ?, ?)",
                          (run_id, step, os.getpid(), time.time()))
    time.sleep(STEP_SECONDS)


def executions(folder):
    return _log_db(folder).execute("SELECT run_id, step, pid, at FROM executions ORDER BY at").fetchall()


def lookup(folder, run_id, order_id):
    executed(folder, run_id, "lookup")
    return ex.world_at(folder).orders.lookup(order_id)


def pay(folder, run_id, order_id, amount, key):
    executed(folder, run_id, "refund")
    return ex.world_at(folder).payments.refund(order_id, amount, idempotency_key=key)


def mail(folder, run_id, to, subject, key):
    executed(folder, run_id, "email")
    return ex.world_at(folder).mailer.send(to, subject, idempotency_key=key)


def close(folder, run_id, ticket, key):
    executed(folder, run_id, "close")
    return ex.world_at(folder).tickets.close(ticket, idempotency_key=key)


@dl.workflow("core-worker-refund")
def refund(ctx, folder, order_id, amount):
    order = ctx.step("lookup", lookup, folder, ctx.run_id, order_id)
    payment = ctx.step("refund", pay, folder, ctx.run_id, order_id, amount,
                       ctx.idempotency_key("refund", order_id))
    ctx.step("email", mail, folder, ctx.run_id, order["email"], f"Refunded {amount}",
             ctx.idempotency_key("email", order_id))
    ctx.step("close", close, folder, ctx.run_id, order["ticket"], ctx.idempotency_key("close", order_id))
    return payment["refund_id"]


def main(store_path, folder):
    engine = dl.Engine(dl.SQLiteStore(store_path))
    while True:
        engine.recover()
        if not engine.store.list_runs([dl.RUNNING, dl.WAITING, dl.SLEEPING]):
            return
        time.sleep(0.01)          # the rest are leased by live workers


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
